"""The bad-input suite's rows and verdicts.

A row is one hostile input (a file, a flag, a reply from an endpoint, a second process) given to the real
command, server or client. Running it ends in exactly one verdict:

- ``clear``: refused with one clear message naming the bad thing (CLI: exit 2, or 1 for a service, and an
  ``error:`` line on stderr holding every string the row expects);
- ``handled``: accepted and done right (the row's check found nothing wrong);
- ``traceback``, ``unclear`` (refused, but the message misses what it must name), ``wrong`` (accepted and
  done wrong, or accepted when it must be refused), ``unbounded`` (past the row's time or the suite's
  memory cap), ``lost`` (something that existed before is gone or damaged).

Only the first two pass. Rows live in ``rows_<area>.py`` modules as a ``ROWS`` list; ``run.py`` runs them.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERDICTS = ("clear", "handled", "traceback", "unclear", "wrong", "unbounded", "lost")
GOOD = ("clear", "handled")


@dataclass
class Outcome:
    verdict: str
    detail: str = ""

    def __post_init__(self) -> None:
        assert self.verdict in VERDICTS, self.verdict


@dataclass
class Row:
    """``run(tmp)`` gets a fresh empty directory (also the working directory and ``SESA_HOME``'s parent)
    and returns the row's :class:`Outcome`. ``timeout_s`` bounds it (past it: ``unbounded``)."""

    area: str
    name: str
    run: Callable[[Path], Outcome]
    timeout_s: float = 30.0


# A check returns None when all is well, a string saying what is wrong (verdict ``wrong``), or an Outcome.
Check = Callable[..., "None | str | Outcome"]


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None
    traceback: str = ""


def invoke(
    argv: Sequence[str], *, input: str | bytes | None = None, env: dict[str, str] | None = None
) -> CliResult:
    """``sesa ARGV`` in this process (the real app, through click's test runner)."""
    import traceback

    from typer.testing import CliRunner

    from sesa_cli.main import build_app

    # a fresh process has no logging handlers; one left by an earlier command would write to its closed stream
    logging.root.handlers.clear()
    res = CliRunner().invoke(build_app(), [str(a) for a in argv], input=input, env=env, catch_exceptions=True)
    exc = res.exception if not isinstance(res.exception, SystemExit) else None
    tb = "".join(traceback.format_exception(exc)) if exc is not None else ""
    return CliResult(res.exit_code, res.stdout, res.stderr, exc, tb)


def judge_cli(
    res: CliResult,
    expect: str,
    contains: Sequence[str] = (),
    check: Check | None = None,
    tmp: Path | None = None,
) -> Outcome:
    """The verdict on one CLI result. ``expect``: ``error`` (a user error, exit 2), ``service`` (exit 1 with
    an ``error:`` line) or ``ok`` (exit 0, then ``check(tmp, res)``)."""
    if isinstance(res.exception, (MemoryError, RowTimeout)):
        return Outcome("unbounded", type(res.exception).__name__)
    if res.exception is not None or "Traceback (most recent call last)" in res.stderr:
        last = (res.traceback or res.stderr).strip().splitlines()[-1:] or [""]
        return Outcome("traceback", last[0][:200])
    extra = check(tmp, res) if check else None
    if isinstance(extra, Outcome):
        return extra
    if expect == "ok":
        if res.exit_code != 0:
            return Outcome("wrong", f"exit {res.exit_code}: {_first_error(res)}")
        return Outcome("wrong", extra) if extra else Outcome("handled")
    if res.exit_code == 0:
        return Outcome("wrong", "accepted (exit 0)" + (f"; {extra}" if extra else ""))
    if extra:
        return Outcome("wrong", extra)
    want = 2 if expect == "error" else 1
    message = _first_error(res)
    missing = [c for c in contains if c.lower() not in res.stderr.lower()]
    if res.exit_code != want or not message or missing:
        return Outcome(
            "unclear",
            f"exit {res.exit_code}, {message[:160]!r}" + (f", missing {missing}" if missing else ""),
        )
    return Outcome("clear", message[:200])


def _first_error(res: CliResult) -> str:
    for line in res.stderr.splitlines():
        s = line.strip(" │╭╰─")
        if s.lower().startswith("error"):
            return s
    return ""


def cli(
    area: str,
    name: str,
    argv: Sequence[str] | Callable[[Path], Sequence[str]],
    *,
    expect: str = "error",
    contains: Sequence[str] | Callable[[Path], Sequence[str]] = (),
    setup: Callable[[Path], Any] | None = None,
    check: Check | None = None,
    input: str | bytes | None = None,
    timeout_s: float = 30.0,
) -> Row:
    """A row that runs ``sesa ARGV`` (ARGV may be built from the row's directory) after ``setup(tmp)``.
    ``check(tmp, result)`` runs afterwards in every case, so a row can look for lost or damaged files."""

    def run(tmp: Path) -> Outcome:
        if setup:
            setup(tmp)
        args = argv(tmp) if callable(argv) else argv
        want = contains(tmp) if callable(contains) else contains
        return judge_cli(invoke(args, input=input), expect, want, check, tmp)

    return Row(area, name, run, timeout_s)


def custom(area: str, name: str, timeout_s: float = 30.0) -> Callable[[Callable[[Path], Outcome]], Row]:
    """Decorator: a row whose body returns its Outcome itself (servers, clients, two processes)."""

    def wrap(fn: Callable[[Path], Outcome]) -> Row:
        return Row(area, name, fn, timeout_s)

    return wrap


class RowTimeout(Exception):
    """Raised in a row that ran past its time."""


@dataclass
class Shared:
    """Long-lived things rows share (a started server): entered on first use, closed when the suite ends."""

    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    made: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, factory: Callable[[], contextlib.AbstractContextManager]) -> Any:
        if name not in self.made:
            self.made[name] = self.stack.enter_context(factory())
        return self.made[name]


SHARED = Shared()


@contextlib.contextmanager
def chdir(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)
