"""What the README's fresh-clone check (2026-12-03) found wrong, kept from coming back in the README and every
docs/ page: a new user has only .venv, so tools are called through it; a `sesa eval` without datasets exits 2;
a notebook written into the tree fails `scripts/test.sh`'s `ruff format --check`."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _command_texts() -> list[str]:
    """Inline code spans and the lines of ```bash blocks (continuations joined), of every page."""
    texts = []
    for page in PAGES:
        text = page.read_text()
        blocks = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.DOTALL)).replace("\\\n", " ")
        texts += re.findall(r"`([^`\n]+)`", text) + [ln.split("  #")[0].strip() for ln in blocks.splitlines()]
    return texts


def test_python_tools_are_called_through_the_venv():
    bare = re.compile(r"^(python|tensorboard|jupyter|papermill|langgraph) ")
    # a command to type has a path or a flag; `langgraph dev` or `python -m vllm...` in prose only name things
    wrong = [c for c in _command_texts() if bare.match(c) and ("/" in c or " --" in c)]
    assert not wrong, f"a fresh clone has these only in .venv (.venv/bin/...): {wrong}"


def test_each_eval_names_its_questions():
    evals = [
        c
        for c in _command_texts()
        if re.match(r"(\.venv/bin/)?sesa eval ", c)
        and not re.match(r"(\.venv/bin/)?sesa eval (compare|\.\.\.)", c)
    ]
    assert evals
    missing = [c for c in evals if "--datasets" not in c and "--data-dir" not in c]
    assert not missing, f"without --datasets or --data-dir `sesa eval` exits 2: {missing}"


def test_papermill_writes_outside_the_tree():
    runs = [c for c in _command_texts() if "papermill notebooks/" in c]
    assert runs
    for c in runs:
        out = c.split()[2]
        assert out.startswith(("runs/", "evals/", "/")), (
            f"{out}: a notebook in the tree fails ruff format --check"
        )
