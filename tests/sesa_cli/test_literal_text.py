"""Text from data and models (documents, questions, ids, model turns) is printed as it is by every `sesa`
command that shows it -- rich markup such as ``[/]`` or ``[red]x[/red]`` inside it never styles or crashes
the output -- and a failed first eval leaves no empty ``evals/<name>/`` behind."""

import asyncio
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1] / "sesa_eval"))  # the eval test doubles

from eval_fakes import ListSearch, ScriptedSolver, write_jsonl

from sesa_cli.main import build_app
from sesa_eval.harness import EvalSettings, evaluate
from sesa_graph.rollout.judge import Judge
from tools.corpus import Doc

QUESTION = "Is [red]x[/red] in [/] or [bold]? answer: [/]Paris[link=http://e.x]"
DOC = Doc("d[/]", "[/]Title[red]", "Paris [red]x[/red] and [/] and [link=http://e.x]e[/link]", 1.0)
runner = CliRunner()


class MarkupSearch(ListSearch):
    def search(self, queries, k=3):
        return [[DOC] for _ in queries]


@pytest.fixture(autouse=True)
def sesa_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SESA_HOME", str(tmp_path / "home"))


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    write_jsonl(d / "alpha.jsonl", [{"id": "[/]q1", "question": QUESTION, "golden_answers": ["[/]Paris"]}])
    return d


def settings(tmp_path, data_dir, **kw):
    return EvalSettings(name="t", out_root=tmp_path / "evals", data_dir=data_dir, **kw)


@pytest.fixture
def marked_eval(tmp_path, data_dir):
    out = asyncio.run(
        evaluate(
            settings(tmp_path, data_dir),
            policy=ScriptedSolver(search_first=True),
            search=MarkupSearch(),
            judge=Judge(None),
        )
    )
    return out.out_dir


@pytest.fixture
def wide(monkeypatch):
    """A console wide enough for the listing's question column, recording what it prints."""
    import sesa_cli.runs

    console = Console(width=200, record=True, force_terminal=False)
    monkeypatch.setattr(sesa_cli.runs, "console", console)
    return console


def test_trace_listing_prints_ids_and_questions_literally(marked_eval, wide):
    res = runner.invoke(build_app(), ["trace", str(marked_eval)])
    assert res.exit_code == 0, res.output
    text = wide.export_text()
    assert "alpha/[/]q1/off/greedy" in text and "Is [red]x[/red] in [/] or [bold]?" in text


def test_trace_detail_prints_documents_and_turns_literally(marked_eval):
    res = runner.invoke(build_app(), ["trace", str(marked_eval), "-r", "alpha/[/]q1/off/greedy"])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert (
        QUESTION in flat and "final answer: [/]Paris[link=http://e.x]" in flat
    )  # (eval records keep no docs)


def test_an_escape_sequence_in_a_document_is_shown_not_sent_to_the_terminal():
    from sesa_runs.trace import Trace

    state = {"question": "q\x1b[2J", "turns": [], "searches": [], "status": "answered", "final": "a\x07"}
    text = Trace.from_state(state).to_text()
    assert "\x1b" not in text and "\x07" not in text and "q\\x1b[2J" in text


def test_rollout_and_propose_print_model_text_literally(monkeypatch):
    from sesa_cli import rollouts

    console = Console(width=200, record=True)
    monkeypatch.setattr(rollouts, "console", console)
    state = {
        "question": QUESTION,
        "turns": [{"text": "<search>[/]</search>", "kind": "search", "content": "[/] [red]q"}],
        "searches": [
            {"query": "[/]", "docs": [{"id": DOC.id, "title": DOC.title, "text": DOC.text, "score": 1.0}]}
        ],
        "status": "answered",
        "final": "[/][bold]",
        "n_turns": 1,
    }
    rollouts._print_trace(state, "answer")
    text = console.export_text()
    assert QUESTION in text and "[/] [red]q" in text and "final answer: [/][bold]" in text
    assert "1. [1.00] [/]Title[red]: Paris [red]x[/red] and [/] and [link=http://e.x]e[/link]" in text
    rollouts._print_trace({**state, "target": "[/]T", "final": QUESTION, "valid": False}, "question")
    text = console.export_text()
    assert "target: [/]T" in text and f"proposed question: {QUESTION}" in text


def test_search_prints_documents_literally(monkeypatch):
    from sesa_cli import search

    class Backend:
        name = "fake"

        def search(self, queries, k=3):
            return [[DOC]]

    console = Console(width=200, record=True)
    monkeypatch.setattr(search, "console", console)
    monkeypatch.setattr(search, "make_backend", lambda cfg: Backend())
    res = runner.invoke(build_app(), ["search", "[/]"])
    assert res.exit_code == 0, res.output
    text = console.export_text()
    assert "1. [/]Title[red]" in text and "id d[/]" in text and DOC.text in text


def test_a_failed_first_eval_leaves_no_directory(tmp_path, data_dir, monkeypatch):
    from sesa_eval import harness
    from sesa_graph.policy.base import PolicyUnavailableError

    def no_model(cfg, **kw):
        raise PolicyUnavailableError("model nope/nope could not be loaded")

    monkeypatch.setattr(harness, "make_policy", no_model)
    s = settings(tmp_path, data_dir)
    with pytest.raises(PolicyUnavailableError):
        asyncio.run(evaluate(s, search=MarkupSearch(), judge=Judge(None)))
    assert not s.out_dir.exists()


def test_an_eval_interrupted_before_any_record_leaves_no_directory(tmp_path, data_dir):
    class Interrupted(ScriptedSolver):
        async def generate(self, requests):
            raise KeyboardInterrupt

    s = settings(tmp_path, data_dir)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(evaluate(s, policy=Interrupted(), search=MarkupSearch(), judge=Judge(None)))
    assert not s.out_dir.exists()


def test_a_failed_rerun_keeps_the_earlier_records(tmp_path, data_dir, marked_eval):
    records = (marked_eval / "records.jsonl").read_text()
    write_jsonl(
        data_dir / "alpha.jsonl", [{"id": "q2", "question": "new? answer: x", "golden_answers": ["x"]}]
    )

    class Interrupted(ScriptedSolver):
        async def generate(self, requests):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(
            evaluate(
                settings(tmp_path, data_dir), policy=Interrupted(), search=MarkupSearch(), judge=Judge(None)
            )
        )
    assert (marked_eval / "records.jsonl").read_text() == records
    assert json.loads(records.splitlines()[0])["question"] == QUESTION


def test_a_bad_dataset_through_the_cli_leaves_no_directory(tmp_path, data_dir):
    out_root = tmp_path / "evals"
    res = runner.invoke(
        build_app(),
        [
            "eval",
            "--data-dir",
            str(data_dir),
            "--datasets",
            "nope",
            "--out-root",
            str(out_root),
            "--no-progress",
        ],
    )
    assert (
        res.exit_code == 2 and "\nerror: unknown dataset 'nope'" in res.output
    )  # (after the settings table)
    assert not out_root.exists() or not any(out_root.iterdir())
