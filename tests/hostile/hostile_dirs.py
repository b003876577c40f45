"""Inputs the terminal and outputs rows share: hostile text, and a corpus, a skill bank, a run and an eval
holding it, built once by the project's own writers (``tests/sesa_runs/conftest.py``'s builders) and
copied into each row's directory."""

from __future__ import annotations

import json
import shutil
import tempfile
from functools import cache
from pathlib import Path

from tests.hostile.harness import CliResult

# set the window title, clear the screen, a C1 CSI, a bidi override, a NUL, and rich markup
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil\u202c [red]x[/red] \x00end"
RAW = ("\x1b", "\x9b", "\u202e", "\x00", "\x07")


def no_raw(tmp: Path, res: CliResult) -> str | None:
    """A check: the command's stdout holds no raw escape, C1, bidi, NUL or BEL character."""
    bad = sorted({repr(c) for c in RAW if c in res.stdout})
    return f"raw {', '.join(bad)} reached stdout" if bad else None


def unfolded(text: str) -> str:
    """``text`` without whitespace and table borders: a table cell folded over lines reads as one again."""
    return "".join(c for c in text if not c.isspace() and c not in "│┃|")


def escaped(tmp: Path, res: CliResult) -> str | None:
    """A check: no raw control characters, and the hostile text is there, shown visibly (``\\x1b``)."""
    if "\\x1b]0;pwned" not in unfolded(res.stdout):
        return "the hostile text is not on stdout (shown visibly) at all"
    return no_raw(tmp, res)


def small_and_clean(limit: int = 50_000):
    """A check: no raw control characters, and the output cut (under ``limit`` characters)."""

    def check(tmp: Path, res: CliResult) -> str | None:
        if len(res.stdout) > limit:
            return f"{len(res.stdout)} characters on stdout: the long field was not cut"
        return no_raw(tmp, res)

    return check


def write_corpus(path: Path, docs: list[tuple[str, str, str]]) -> Path:
    """A wiki-18-style JSONL corpus of (id, title, text)."""
    with path.open("w", encoding="utf-8") as f:
        for i, title, text in docs:
            f.write(json.dumps({"id": i, "contents": f'"{title}"\n{text}'}) + "\n")
    return path


@cache
def _root() -> Path:
    return Path(tempfile.mkdtemp(prefix="hostile-dirs-"))


@cache
def _bank_template() -> Path:
    from sesa_graph.memory import MemoryConfig, Skill, SkillBank
    from tests.sesa_runs.conftest import HashEncoder

    enc = HashEncoder()
    bank = SkillBank.create(_root() / "bank", MemoryConfig(), enc)
    skills = [
        Skill(
            id="d1-hostile",
            description=f"Look it up {HOSTILE}",
            trigger=f"When {HOSTILE}",
            avoid="",
            queries=[f"[work] {HOSTILE}"],
            category="decomposition",
            created_step=1,
            source="distilled",
        ),
        Skill(
            id="d1-long",
            description="long " + "z" * 100_000,
            trigger="A very long skill.",
            avoid="",
            queries=["q"],
            category="decomposition",
            created_step=1,
            source="distilled",
        ),
    ]
    bank.commit(
        step=1,
        admit=[(s, enc.encode_documents([s.embed_text()])[0]) for s in skills],
        evict={},
        report={"picked": 2, "admitted": 2},
    )
    bank.close()
    return _root() / "bank"


@cache
def _run_template() -> Path:
    from tests.sesa_runs.conftest import _solver_trajs, build_run
    from training.store import TrajectoryStore

    run = build_run(_root() / "runs", "tiny")
    doc = {
        "id": f"id {HOSTILE}",
        "title": f"T {HOSTILE}",
        "text": f"{HOSTILE} " + "w" * 100_000,
        "score": 1.0,
    }
    turns = [
        {
            "text": HOSTILE,
            "kind": "search",
            "content": HOSTILE,
            "think": HOSTILE,
            "reason": None,
            "finish": "stop",
        },
        {
            "text": HOSTILE,
            "kind": "answer",
            "content": HOSTILE,
            "think": "",
            "reason": None,
            "finish": "stop",
        },
    ]
    trajs = [
        t.model_copy(
            update={
                "step": 5,
                "question": HOSTILE + " q" * 50_000,
                "final": HOSTILE,
                "target": HOSTILE,
                "turns_json": json.dumps(turns),
                "searches_json": json.dumps([{"query": HOSTILE, "docs": [doc]}]),
            }
        )
        for t in _solver_trajs(4, [], 2)
    ]
    TrajectoryStore(run).write(5, "solver", trajs)
    return run


@cache
def _eval_template() -> Path:
    from tests.sesa_runs.conftest import build_eval

    ev = build_eval(_root() / "evals", _run_template() / "bank", "tiny-eval")
    lines = (ev / "records.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines if x.strip()]
    for r in recs:
        r["question"] = HOSTILE + " " + r.get("question", "")
        r["final"] = HOSTILE
    (ev / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return ev


def bank(tmp: Path, name: str = "bank") -> Path:
    """A skill bank whose distilled skills hold hostile text (v0 seeds, v1 + two distilled skills)."""
    return Path(shutil.copytree(_bank_template(), tmp / name))


def run(tmp: Path, name: str = "tiny") -> Path:
    """``build_run``'s tiny run plus an uncommitted step 5 whose solver rollouts hold hostile text and a
    100k-character question and document (``solver/5/4-0/0``)."""
    return Path(shutil.copytree(_run_template(), tmp / "runs" / name))


def evaluation(tmp: Path, name: str = "tiny-eval") -> Path:
    """``build_eval``'s tiny eval with hostile questions and answers in its records."""
    return Path(shutil.copytree(_eval_template(), tmp / "evals" / name))


RUN_ROLLOUT = "solver/5/4-0/0"
EVAL_ROLLOUT = "alpha/a1/off/greedy"


def scripted_eval(
    tmp: Path, argv: list, patches: dict | None = None, datasets: dict | None = None
) -> CliResult:
    """``sesa eval ARGV`` through the real CLI on a scripted policy and search (``tests/sesa_eval``'s
    doubles), over ``datasets`` (file stem -> rows; default: one dataset with hostile questions, ids and
    gold answers). ``patches``: ``{"module.attr": replacement}`` for faults (a full disk). (The runner drops the logging
    handler ``sesa eval`` leaves on this row's stderr.)"""
    import unittest.mock
    from contextlib import ExitStack

    from tests.hostile.harness import invoke
    from tests.sesa_eval.eval_fakes import ListSearch, ScriptedSolver

    data = tmp / "data"
    data.mkdir(exist_ok=True)
    rows = [
        {"id": f"q1{HOSTILE}", "question": f"Who? {HOSTILE} answer: {HOSTILE}", "golden_answers": [HOSTILE]},
        {"id": "q2", "question": "Long " + "q" * 100_000 + " answer: Paris", "golden_answers": ["Paris"]},
    ]
    for stem, items in (datasets or {"alpha": rows}).items():
        with (data / f"{stem}.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in items)
    policy = ScriptedSolver(search_first=True)
    fakes = {
        "sesa_eval.harness.make_policy": lambda cfg, tokenizer=None, log_path=None: policy,
        "tools.backends.make_backend": lambda cfg: ListSearch(),
        **(patches or {}),
    }
    with ExitStack() as stack:
        for target, new in fakes.items():
            stack.enter_context(unittest.mock.patch(target, new))
        return invoke(["eval", "--data-dir", data, "--out-root", tmp / "evals", "--judge", "none", *argv])
