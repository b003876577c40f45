"""More rows of area "outputs": damaged or odd report.json files for ``sesa eval compare`` and ``sesa
report``, trace filters no rollout can match, and outputs that are devices, FIFOs or symlinks into a bank
(the helpers are :mod:`tests.hostile.rows_outputs`')."""

from __future__ import annotations

import os
from pathlib import Path

from tests.hostile import hostile_dirs as H
from tests.hostile.harness import CliResult, cli
from tests.hostile.rows_outputs import A, _export, _row


def _eval_with(damage):
    def setup(tmp: Path) -> None:
        damage(H.evaluation(tmp))

    return setup


def _report_json(text: str):
    return lambda ev: (ev / "report.json").write_text(text)


def _damaged_report_noted(tmp: Path, res: CliResult) -> str | None:
    if "report.json is damaged" not in res.stderr:
        return "sesa report did not say that report.json is damaged"
    if "is damaged" not in (tmp / "evals" / "tiny-eval" / "report.html").read_text():
        return "report.html has no note that report.json is damaged"
    return None


def _compare(tmp: Path) -> list:
    return ["eval", "compare", tmp / "evals/tiny-eval", tmp / "evals/tiny-eval"]


def _trace_filter(flag: str, value: str):
    return lambda t: ["trace", t / "runs/tiny", flag, value]


ROWS = [
    cli(
        A,
        "eval compare: report.json not JSON",
        _compare,
        setup=_eval_with(_report_json("{not json")),
        contains=["report.json", "JSON"],
    ),
    cli(
        A,
        "eval compare: report.json a JSON list",
        _compare,
        setup=_eval_with(_report_json("[1, 2]")),
        contains=["report.json", "modes"],
    ),
    cli(
        A,
        "eval compare: report.json without datasets",
        _compare,
        setup=_eval_with(_report_json('{"modes": ["off"]}')),
        contains=["report.json"],
    ),
    cli(
        A,
        "eval compare: report.json a FIFO",
        _compare,
        setup=_eval_with(lambda ev: ((ev / "report.json").unlink(), os.mkfifo(ev / "report.json"))),
        contains=["report.json", "regular file"],
        timeout_s=10,
    ),
    cli(
        A,
        "report: eval whose report.json is a JSON list",
        lambda t: ["report", t / "evals/tiny-eval"],
        expect="ok",
        setup=_eval_with(_report_json("[1, 2]")),
        check=_damaged_report_noted,
        timeout_s=60,
    ),
    cli(
        A, "trace --role bogus", _trace_filter("--role", "bogus"), setup=H.run, contains=["--role", "solver"]
    ),
    cli(
        A,
        "trace --status answred (a typo)",
        _trace_filter("--status", "answred"),
        setup=H.run,
        contains=["--status", "answered"],
    ),
    cli(
        A,
        "trace --failure wrong (not a kind)",
        _trace_filter("--failure", "wrong"),
        setup=H.run,
        contains=["--failure", "wrong_gold_retrieved"],
    ),
    _row(
        "bank export -o /dev/full --force (a device)",
        _export("-o", "/dev/full", "--force"),
        (),
        ["/dev/full", "regular file"],
    ),
    _row(
        "trace --html a FIFO --force",
        lambda t: (
            os.mkfifo(t / "f.html"),
            ["trace", t / "runs/tiny", "-r", H.RUN_ROLLOUT, "--html", t / "f.html", "--force"],
        )[1],
        (),
        ["f.html", "regular file"],
    ),
    _row(
        "bank export -o a symlink to BANK/state.json --force",
        lambda t: (
            Path(t / "out.yaml").symlink_to(t / "bank/state.json"),
            ["bank", "export", t / "bank", "-o", t / "out.yaml", "--force"],
        )[1],
        ("bank/state.json",),
        ["skill bank"],
    ),
    cli(
        A,
        "search --corpus a FIFO",
        ["search", "x", "--corpus", "c.fifo"],
        setup=lambda t: os.mkfifo(t / "c.fifo"),
        contains=["c.fifo", "regular file"],
        timeout_s=10,
    ),
    cli(
        A,
        "report of a run whose config.yaml is a YAML alias bomb",
        lambda t: ["report", _bombed_run(t)],
        expect="ok",
        check=lambda t, r: None if (t / "runs" / "tiny" / "report.html").exists() else "no report.html",
        timeout_s=30,
    ),
]


def _bombed_run(tmp: Path) -> Path:
    from tests.sesa_runs.conftest import build_run

    run = build_run(tmp / "runs")
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    levels += [f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
    (run / "config.yaml").write_text("\n".join(levels) + "\n")
    return run
