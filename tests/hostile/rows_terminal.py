"""Untrusted bytes on the terminal: corpus documents, skill text from the distiller, questions, model turns,
ids and directory names holding ESC/OSC sequences, C1 bytes, bidi overrides, NULs, rich markup, a 1 MB id
and 100k-character fields. Every command that prints them shows them visibly (``\\x1b``), never raw, and
cut, in bounded time."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.hostile import hostile_dirs as H
from tests.hostile.harness import CliResult, cli, custom, judge_cli

A = "terminal"


def _corpus(tmp: Path, docs: list[tuple[str, str, str]]) -> None:
    H.write_corpus(tmp / "c.jsonl", [*docs, ("d-paris", "Paris", "Paris is the capital of France.")])


def _search(name: str, docs: list[tuple[str, str, str]], check, query: str = "eiffel tower", **kw):
    return cli(
        A,
        name,
        ["search", query, "--corpus", "c.jsonl", "-k", "2"],
        expect="ok",
        setup=lambda tmp: _corpus(tmp, docs),
        check=check,
        **kw,
    )


def _literal(text: str):
    def check(tmp: Path, res: CliResult) -> str | None:
        if H.unfolded(text) not in H.unfolded(res.stdout):
            return f"{text!r} is not printed literally (taken as rich markup?)"
        return H.no_raw(tmp, res)

    return check


def _renamed(kind: str, hostile: str):
    """Setup: the bank, run or eval copied to a directory whose name holds ``hostile``."""

    def setup(tmp: Path) -> None:
        made = {"bank": H.bank, "run": H.run, "eval": H.evaluation}[kind](tmp)
        made.rename(made.with_name(hostile))

    return setup


def _path(kind: str, hostile: str):
    sub = {"bank": "", "run": "runs", "eval": "evals"}[kind]
    return lambda tmp: tmp / sub / hostile


ESC_NAME = "x\x1b]0;pwned\x07\x1b[2J"
BIDI_NAME = "x\u202etxt.exe"
EIFFEL = "Eiffel tower iron lattice"

ROWS = [
    # ---- sesa search --------------------------------------------------------------------------------------
    _search(
        "search: OSC title, clear screen, C1, bidi, NUL in a document",
        [("d1", f"Eiffel {H.HOSTILE}", f"{EIFFEL} {H.HOSTILE}")],
        H.escaped,
    ),
    _search(
        "search: 1 MB document id",
        [("A" * 1_000_000 + H.HOSTILE, "Eiffel", EIFFEL)],
        H.small_and_clean(20_000),
        timeout_s=20,
    ),
    _search(
        "search: 100k-character document text",
        [("d1", "Eiffel", f"{EIFFEL} " + "y" * 100_000)],
        H.small_and_clean(20_000),
    ),
    _search(
        "search: 1 MB title",
        [("d1", "Eiffel " + "t" * 1_000_000, EIFFEL)],
        H.small_and_clean(20_000),
        timeout_s=20,
    ),
    _search(
        "search: rich markup [red] and [/] in title and text",
        [("d[/]1", "Eiffel [red]x[/red]", f"{EIFFEL} [/] [bold]b")],
        _literal("[red]x[/red]"),
    ),
    _search("search: ESC in a document id", [(f"id{H.HOSTILE}", "Eiffel", EIFFEL)], H.escaped),
    _search(
        "search: tabs and line breaks in a title",
        [("d1", "Eiffel\t\r\x0b\x0cline \x1b[2J", EIFFEL)],
        H.no_raw,
    ),
    _search(
        "search: C1 CSI bytes alone (\\x9b) in text",
        [("d1", "Eiffel", f"{EIFFEL} \x9b2J\x9b31m \x85 \x90")],
        H.no_raw,
    ),
    _search(
        "search: every bidi control in text",
        [
            (
                "d1",
                "Eiffel",
                EIFFEL + " \u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c",
            )
        ],
        H.no_raw,
    ),
    # ---- sesa bank ----------------------------------------------------------------------------------------
    cli(
        A,
        "bank show: distilled skill with OSC/ESC/C1/bidi",
        lambda t: ["bank", "show", t / "bank", "-n", "0"],
        expect="ok",
        setup=H.bank,
        check=H.escaped,
    ),
    cli(
        A,
        "bank show: 100k-character skill description",
        lambda t: ["bank", "show", t / "bank", "-n", "0"],
        expect="ok",
        setup=H.bank,
        check=H.small_and_clean(20_000),
    ),
    cli(
        A,
        "bank show: rich markup in skill text",
        lambda t: ["bank", "show", t / "bank", "-n", "0"],
        expect="ok",
        setup=H.bank,
        check=_literal("[red]x"),
    ),
    cli(
        A,
        "bank show BANK@v1: hostile snapshot",
        lambda t: ["bank", "show", f"{t / 'bank'}@v1", "-n", "0"],
        expect="ok",
        setup=H.bank,
        check=H.escaped,
    ),
    cli(
        A,
        "bank show: bank directory named with ESC",
        lambda t: ["bank", "show", _path("bank", ESC_NAME)(t)],
        expect="ok",
        setup=_renamed("bank", ESC_NAME),
        check=H.no_raw,
    ),
    cli(
        A,
        "bank show: bank directory named with a bidi override",
        lambda t: ["bank", "show", _path("bank", BIDI_NAME)(t)],
        expect="ok",
        setup=_renamed("bank", BIDI_NAME),
        check=H.no_raw,
    ),
    cli(
        A,
        "bank diff v0 v1: admitted hostile skill",
        lambda t: ["bank", "diff", "0", "1", "--bank", t / "bank"],
        expect="ok",
        setup=H.bank,
        check=H.escaped,
    ),
    cli(
        A,
        "bank export (yaml, stdout): hostile skill",
        lambda t: ["bank", "export", t / "bank"],
        expect="ok",
        setup=H.bank,
        check=lambda t, r: _round_trip(r, "yaml"),
    ),
    cli(
        A,
        "bank export --format jsonl (stdout): hostile skill",
        lambda t: ["bank", "export", t / "bank", "--format", "jsonl"],
        expect="ok",
        setup=H.bank,
        check=lambda t, r: _round_trip(r, "jsonl"),
    ),
    # ---- sesa trace / report ------------------------------------------------------------------------------
    cli(
        A,
        "trace listing: run with hostile 100k-character questions",
        lambda t: ["trace", t / "runs" / "tiny"],
        expect="ok",
        setup=H.run,
        check=H.small_and_clean(20_000),
    ),
    cli(
        A,
        "trace --role solver --failure: hostile run listing",
        lambda t: ["trace", t / "runs" / "tiny", "--role", "solver", "--limit", "3"],
        expect="ok",
        setup=H.run,
        check=H.no_raw,
    ),
    cli(
        A,
        "trace --rollout: hostile turns, documents, answer",
        lambda t: ["trace", t / "runs" / "tiny", "-r", H.RUN_ROLLOUT],
        expect="ok",
        setup=H.run,
        check=H.escaped,
    ),
    cli(
        A,
        "trace --rollout --plain: hostile turns",
        lambda t: ["trace", t / "runs" / "tiny", "-r", H.RUN_ROLLOUT, "--plain"],
        expect="ok",
        setup=H.run,
        check=H.escaped,
    ),
    cli(
        A,
        "trace --rollout: 100k-character document cut",
        lambda t: ["trace", t / "runs" / "tiny", "-r", H.RUN_ROLLOUT, "--plain"],
        expect="ok",
        setup=H.run,
        check=H.small_and_clean(30_000),
    ),
    cli(
        A,
        "trace listing: eval with hostile questions",
        lambda t: ["trace", t / "evals" / "tiny-eval"],
        expect="ok",
        setup=H.evaluation,
        check=H.no_raw,
    ),
    cli(
        A,
        "trace --rollout: eval record with hostile question and answer",
        lambda t: ["trace", t / "evals" / "tiny-eval", "-r", H.EVAL_ROLLOUT],
        expect="ok",
        setup=H.evaluation,
        check=H.escaped,
    ),
    cli(
        A,
        "trace listing: run directory named with ESC",
        lambda t: ["trace", _path("run", ESC_NAME)(t)],
        expect="ok",
        setup=_renamed("run", ESC_NAME),
        check=H.no_raw,
    ),
    cli(
        A,
        "report: run directory named with ESC",
        lambda t: ["report", _path("run", ESC_NAME)(t)],
        expect="ok",
        setup=_renamed("run", ESC_NAME),
        check=H.no_raw,
        timeout_s=60,
    ),
    # ---- sesa eval compare --------------------------------------------------------------------------------
    cli(
        A,
        "eval compare: eval directories named with ESC and bidi",
        lambda t: ["eval", "compare", _path("eval", ESC_NAME)(t), t / "evals" / BIDI_NAME],
        expect="ok",
        setup=lambda t: (
            _renamed("eval", ESC_NAME)(t),
            shutil.copytree(t / "evals" / ESC_NAME, t / "evals" / BIDI_NAME),
        ),
        check=H.no_raw,
    ),
]


def _round_trip(res: CliResult, fmt: str) -> str | None:
    """The export on stdout holds no raw control character and still reads back as the same skills."""
    import json

    import yaml

    bad = H.no_raw(Path("."), res)
    if bad:
        return bad
    if fmt == "yaml":
        skills = yaml.safe_load(res.stdout)["skills"]
    else:
        skills = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    texts = [s.get("description", "") for s in skills]
    if f"Look it up {H.HOSTILE}" not in texts:
        return "the exported skill text is not the bank's (escaped into other text?)"
    return None


SMALL = H.small_and_clean(60_000)


def _eval_row(name: str, argv: list, datasets=None, check=SMALL):
    """``sesa eval`` on a scripted model over hostile questions, ids and answers: the settings, progress,
    tables and summary lines hold no raw control character."""

    @custom(A, name)
    def row(tmp: Path):
        res = H.scripted_eval(tmp, argv, datasets=datasets)
        return judge_cli(res, "ok", check=check, tmp=tmp)

    return row


ROWS += [
    _eval_row("eval: hostile questions, ids and gold answers (--no-progress)", ["--no-progress"]),
    _eval_row("eval: hostile questions with progress bars", ["--progress"]),
    _eval_row(
        "eval: a dataset file named with ESC and rich markup",
        ["--no-progress", "--datasets", f"d{ESC_NAME}[red]x"],
        datasets={
            f"d{ESC_NAME}[red]x": [
                {"id": "q1", "question": "Who? answer: Paris", "golden_answers": ["Paris"]}
            ]
        },
        check=H.escaped,
    ),
    cli(
        A,
        "trace --rollout with an ESC id: the error line",
        lambda t: ["trace", t / "runs" / "tiny", "-r", f"solver/{H.HOSTILE}"],
        setup=H.run,
        check=lambda t, r: H.no_raw(t, CliResult(r.exit_code, r.stderr, "")),
        contains=["\\x1b"],
    ),
]


def _wide(name: str, argv, setup, check, module: str = "sesa_cli.runs"):
    """A row on a 200-column console (the trace listing shows its question column from 100 columns on)."""

    @custom(A, name)
    def row(tmp: Path):
        import importlib
        import unittest.mock

        from rich.console import Console

        from tests.hostile.harness import invoke

        setup(tmp)
        wide = Console(width=200, highlight=False)
        with unittest.mock.patch.object(importlib.import_module(module), "console", wide):
            res = invoke(argv(tmp))
        return judge_cli(res, "ok", check=check, tmp=tmp)

    return row


ROWS += [
    _wide(
        "trace listing at 200 columns: hostile 100k-character questions",
        lambda t: ["trace", t / "runs" / "tiny"],
        H.run,
        H.small_and_clean(30_000),
    ),
    _wide(
        "trace listing at 200 columns: eval questions with OSC/ESC",
        lambda t: ["trace", t / "evals" / "tiny-eval"],
        H.evaluation,
        H.escaped,
    ),
    _wide(
        "bank show at 200 columns: hostile skill text",
        lambda t: ["bank", "show", t / "bank", "-n", "0"],
        H.bank,
        H.escaped,
        "sesa_cli.bank",
    ),
]
