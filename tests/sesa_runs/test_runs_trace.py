"""Rendering one rollout (sesa_runs.trace) and the `sesa trace` / `sesa report` commands."""

import re

import pytest
import typer
from typer.testing import CliRunner

from sesa_cli.runs import register
from sesa_runs import load
from sesa_runs.trace import gold_spans


@pytest.fixture(scope="module")
def cli():
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


def test_text_trace_has_every_part(dirs):
    tr = load.open_run(dirs["run"]).trace("solver/3/3-0/1")
    text = tr.to_text()
    assert str(tr) == text
    for part in (
        "solver/3/3-0/1",
        "step 3",
        "question: Who composed the opera based on the play <Salome>",
        "gold: Richard Strauss",
        "skills in the prompt (bank v1)",
        "d2-abc",
        "Search the adapted work's author",  # the skill text, from the snapshot it was retrieved from
        "(no longer in the bank)",
        "reasoning: I should look this up.",
        "search: Salome opera",
        "Salome (play): Salome is a tragedy",
        "★ gold",
        "answer: Oscar Wilde",
        "verdict: wrong",
        "answered wrongly although a retrieved document contains the gold",
    ):
        assert part in text, part
    assert text.index("turn 1 · search") < text.index("turn 2 · answer")


def test_html_trace_escapes_and_highlights(dirs):
    tr = load.open_run(dirs["run"]).trace("solver/0/0-0/1")
    h = tr._repr_html_()
    assert h == tr.to_html()
    assert "<b>in one act</b>" not in h and "&lt;b&gt;in one act&lt;/b&gt;" in h  # document text is escaped
    assert "&lt;Salome&gt;" in h
    assert re.search(r"<mark[^>]*>Richard Strauss</mark>", h)
    assert "★ contains the gold" in h and "seed-" in h


def test_other_endings(dirs):
    run = load.open_run(dirs["run"])
    assert "no results: the search failed" in run.trace("solver/3/3-0/0").to_text()
    malformed = run.trace("solver/0/0-0/2").to_text()
    assert (
        "turn 1 · invalid (no_action) · cut at the token limit" in malformed and "raw: 'I think" in malformed
    )
    prop = run.trace("proposer/1/1-1/0").to_text()
    assert (
        "target: Vienna" in prop
        and "invalid question (spoiler)" in prop
        and "proposed question: Who is Vienna?" in prop
    )


def test_eval_trace_parses_turn_text(dirs):
    ev = load.open_eval(dirs["eval"])
    text = ev.trace("alpha/a2/on/greedy").to_text()
    assert (
        "turn 1 · search" in text
        and "search: composer of Salome" in text
        and "(documents not recorded)" in text
    )
    assert "skills in the prompt (bank v2)" in text and "seed-bridge-entity" in text
    assert "verdict: correct" in text
    err = ev.trace("bamboogle/b2/off/greedy").to_text()
    assert "error: search_error" in err and "verdict" not in err


def test_gold_spans():
    assert gold_spans("The Eiffel tower, eiffel Tower!", ["eiffel tower"]) == [
        ("The ", False),
        ("Eiffel tower", True),
        (", ", False),
        ("eiffel Tower", True),
        ("!", False),
    ]
    assert gold_spans("party", ["art"]) == [("party", False)]  # whole words only


def test_cli_trace(cli, dirs):
    r = cli("trace", dirs["run"], "--rollout", "solver/0/0-0/1", "--plain")
    assert r.exit_code == 0, r.output
    assert "search: Salome opera" in r.output and "gold: Richard Strauss" in r.output
    listing = cli("trace", dirs["run"], "--failure", "max_turns")
    assert listing.exit_code == 0 and "solver/1/1-0/1" in listing.output
    missing = cli("trace", dirs["run"], "--rollout", "solver/0/0-0/7")
    assert missing.exit_code == 2 and "ids look like" in missing.output
    html = dirs["run"].parent / "t.html"
    assert cli("trace", dirs["eval"], "-r", "alpha/a1/on/greedy", "--html", html).exit_code == 0
    assert "<mark" not in html.read_text() and "composer of Salome" in html.read_text()


def test_cli_errors_on_a_non_run_dir(cli, tmp_path):
    for cmd in ("trace", "report"):
        r = cli(cmd, tmp_path)
        assert r.exit_code == 2 and "config.yaml is missing" in r.output
