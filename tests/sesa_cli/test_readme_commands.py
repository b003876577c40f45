"""The `sesa` commands of the README and the docs/ pages as a new user types them: every command path they name
exists, every flag they show is one that command takes, and the cheap ones (config and memory-plan printouts)
run as written."""

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sesa_cli.main import build_app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
runner = CliRunner()


def page_commands(text: str) -> list[str]:
    """Every `sesa ...` a page shows: inline code and lines of its code blocks (continuations joined).
    `sesa - ssp` (a difference of two arms in a table) is not a command."""
    inline = [m.replace("\\|", "|") for m in re.findall(r"`((?:\.venv/bin/)?sesa [a-z][^`]*)`", text)]
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.DOTALL)).replace("\\\n", " ")
    lines = [ln.split("  #")[0].strip() for ln in blocks.splitlines()]
    return inline + [ln for ln in lines if re.match(r"(\.venv/bin/)?sesa [a-z]", ln)]


def shown_commands() -> dict[str, str]:
    """command -> the first page that shows it (named in a failure, so the fix is easy to find)."""
    found: dict[str, str] = {}
    for page in PAGES:
        for command in page_commands(page.read_text()):
            found.setdefault(command, page.relative_to(ROOT).as_posix())
    return found


def command_path(words: list[str]) -> list[str]:
    """The subcommand words: lowercase names up to the first flag, argument or placeholder."""
    path = []
    for w in words:
        if not re.fullmatch(r"[a-z][a-z-]*", w) or (path and path[0] in LEAVES):
            break
        path.append(w)
    return path


LEAVES = {
    "train",
    "rollout",
    "propose",
    "trace",
    "report",
    "warmup",
    "trainers",
    "plan",
}  # take no subcommand


def flags(command: str) -> list[str]:
    """The --flags a command line shows (alternatives and optional brackets included)."""
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", command)))


def _words(command: str) -> list[str]:
    text = re.sub(r"[\[\]]", " ", command.split("sesa ", 1)[1])
    try:
        return shlex.split(text)
    except ValueError:  # an unbalanced quote in a table cell
        return text.split()


COMMANDS = shown_commands()


def test_the_pages_show_commands():
    assert len(COMMANDS) > 40 and any("--report-to" in c for c in COMMANDS)
    assert page_commands((ROOT / "README.md").read_text()), "the README shows no sesa command"
    assert page_commands((ROOT / "docs" / "CLI.md").read_text()), "the command reference shows no command"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_shown_command_and_its_flags_exist(command):
    app = build_app()
    words = _words(command)
    path = command_path(words)
    rest = words[len(path) :]
    alternatives = rest[0].split("|") if rest and re.fullmatch(r"[a-z]+(\|[a-z]+)+", rest[0]) else None
    helps = []
    for p in [path + [a] for a in alternatives] if alternatives else [path]:
        out = runner.invoke(app, [*p, "--help"], terminal_width=200)
        assert out.exit_code == 0, (COMMANDS[command], command, p, out.output)
        helps.append(out.output)
    for flag in flags(command):
        assert any(flag in h for h in helps), (COMMANDS[command], command, flag)


@pytest.mark.parametrize(
    "command",
    [c for c in sorted(COMMANDS) if re.fullmatch(r"sesa (config show|plan) [^\[\]|]*", c)],
)
def test_the_pages_printouts_run_as_written(command):
    args = shlex.split(command.replace("CONFIG", "configs/tiny-cpu.yaml"))[1:]
    out = runner.invoke(build_app(), args)
    assert out.exit_code == 0, (COMMANDS[command], command, out.output[-2000:])
