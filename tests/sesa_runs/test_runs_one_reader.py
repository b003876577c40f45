"""Issue 16: one JSONL reader with one error policy, one bank finder, one status table, one trace
renderer, one Off/On headline -- tested where the read side of runs and evals uses them."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from rich.console import Console

from sesa_eval.records import RecordStore
from sesa_eval.report import METRICS, aggregate
from sesa_graph import statuses
from sesa_graph.fsutil import JsonlError, parse_jsonl, read_jsonl
from sesa_graph.memory.bank_layout import BankNotFoundError
from sesa_graph.memory.snapshot import bank_dir
from sesa_graph.memory.utility import IGNORED_STATUSES, Outcome, classify
from sesa_runs import load
from sesa_runs.files import failure_kind
from sesa_runs.trace import Trace

# ---- the reader ---------------------------------------------------------------------------------------------


def test_a_bad_middle_line_is_an_error_naming_file_and_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2, "b"\n{"a": 3}\n')
    with pytest.raises(JsonlError, match=r"x\.jsonl:3: not valid JSON") as exc:
        read_jsonl(p)
    assert exc.value.line == 3
    p.write_text('{"a": 1}\n[1, 2]\n{"a": 3}\n')  # JSON, but not an object
    with pytest.raises(JsonlError, match=r"x\.jsonl:2: expected a JSON object"):
        read_jsonl(p)


def test_a_torn_last_line_is_skipped_and_counted(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3, "b": "hal')  # killed mid-append
    rows = read_jsonl(p)
    assert rows == [{"a": 1}, {"a": 2}] and rows.torn == 1 and rows.line_numbers == [1, 3]
    p.write_bytes('{"a": 1}\n{"a": "é'.encode()[:-1])  # torn inside a UTF-8 character
    assert read_jsonl(p).torn == 1


def test_a_complete_last_line_without_newline_is_kept(tmp_path):
    rows = parse_jsonl('{"a": 1}\n{"a": 2}', tmp_path / "x.jsonl")
    assert rows == [{"a": 1}, {"a": 2}] and rows.torn == 0


def test_a_bad_last_line_with_its_newline_is_not_torn(tmp_path):
    with pytest.raises(JsonlError, match=r"x\.jsonl:2"):
        parse_jsonl('{"a": 1}\n{"a": 2\n', tmp_path / "x.jsonl")


def test_missing_ok(tmp_path):
    assert read_jsonl(tmp_path / "nope.jsonl", missing_ok=True) == []
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "nope.jsonl")


def test_record_store_keeps_a_complete_unterminated_record_and_appends_after_it(tmp_path):
    p = tmp_path / "records.jsonl"
    p.write_text('{"key": "a"}\n{"key": "b"}')
    store = RecordStore(p)
    assert set(store.latest) == {"a", "b"}
    store.append({"key": "c"})
    assert [r["key"] for r in read_jsonl(p)] == ["a", "b", "c"]


def test_runs_readers_report_a_corrupt_middle_line(tmp_path, dirs):
    run_dir = tmp_path / "r"
    shutil.copytree(dirs["run"], run_dir)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    (run_dir / "metrics.jsonl").write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    with pytest.raises(JsonlError, match=r"metrics\.jsonl:2"):
        load.open_run(run_dir).metrics()


def test_eval_counts_a_torn_record(tmp_path, dirs):
    ev_dir = tmp_path / "e"
    shutil.copytree(dirs["eval"], ev_dir)
    with open(ev_dir / "records.jsonl", "a") as f:
        f.write('{"key": "alpha/a9/on/greedy", "da')
    ev = load.open_eval(ev_dir)
    assert len(ev.records()) == len(load.open_eval(dirs["eval"]).records()) and ev.torn_lines == 1


# ---- the bank finder ----------------------------------------------------------------------------------------


def test_bank_dir_finds_a_bank_from_a_run_an_eval_ref_or_its_plain_files(tmp_path, dirs):
    bank = bank_dir(dirs["run"])
    assert bank == dirs["run"] / "bank"
    assert bank_dir(f"{bank}@v2") == bank == bank_dir(bank)
    copy = tmp_path / "run" / "memory"  # an older run layout, copied without its state
    shutil.copytree(bank / "snapshots", copy / "snapshots")
    assert bank_dir(tmp_path / "run") == copy
    with pytest.raises(BankNotFoundError):
        bank_dir(tmp_path / "nothing")


# ---- the status table ---------------------------------------------------------------------------------------


def test_one_status_table_drives_every_reader():
    assert statuses.FAILURE_STATUSES == ("max_turns", "max_tokens", "malformed", "search_error", "error")
    assert statuses.OUTCOMES["max_tokens"].description == "ran out of its token budget"
    assert statuses.OUTCOMES["max_turns"].description == "ran out of turns"
    # max_tokens is treated like max_turns: its own failure kind, neutral for the bank
    for s in ("max_turns", "max_tokens"):
        assert failure_kind(s, False, True) == s
        assert s not in IGNORED_STATUSES and classify(Outcome(["k"], False, s)) == "neutral"
    assert IGNORED_STATUSES == {"malformed", "search_error", "error"}
    assert list(load.FAILURE_KINDS) == list(statuses.KIND_ORDER[1:])


def test_the_eval_report_has_a_column_per_failure_status():
    from sesa_eval.report import diagnostic_rows

    d = {"records": 2, "answered_pct": 50.0, "mean_turns": 1, "mean_searches": 1, "mean_skills": 0}
    rep = {
        "modes": ["off"],
        "diagnostics": {"off": {**d, "status": {"max_tokens": 1}, "judge_method": {}}},
    }
    head, row = diagnostic_rows(rep)
    assert dict(zip(head, row))["max_tokens"] == "1" and "max_turns" in head


# ---- the trace renderer -------------------------------------------------------------------------------------


def test_the_cli_trace_is_the_trace_renderer_and_escapes_nothing_into_markup():
    state = {
        "question": "What is [bold]this[/]?",
        "status": "max_tokens",
        "final": None,
        "n_turns": 1,
        "turns": [{"text": "<search>a [/] b</search>", "kind": "search", "content": "a [/] b"}],
        "searches": [{"query": "a [/] b", "docs": [{"title": "[/]", "text": "doc with [/] and [red]"}]}],
    }
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(Trace.from_state(state))
    text = out.getvalue()
    assert "What is [bold]this[/]?" in text and "doc with [/] and [red]" in text
    from sesa_cli import rollouts

    buf = io.StringIO()
    old = rollouts.console.file
    rollouts.console.file = buf
    try:
        rollouts._print_trace(state, "answer")
    finally:
        rollouts.console.file = old
    assert "doc with [/] and [red]" in buf.getvalue()


# ---- the Off/On headline ------------------------------------------------------------------------------------


def test_off_on_is_the_reports_headline(dirs):
    ev = load.open_eval(dirs["eval"])
    rep = json.loads((dirs["eval"] / "report.json").read_text())
    t = ev.off_on().set_index("dataset")
    for metric, field in METRICS.items():
        cells = aggregate(ev._records(), rep["datasets"], rep["modes"], field)
        t = ev.off_on(metric).set_index("dataset")
        for m in rep["modes"]:
            for ds in [*rep["datasets"], "mean"]:
                want = cells[m][ds]["mean"]
                got = t.loc[ds, m]
                assert (want is None and got is None) or got == pytest.approx(want), (metric, m, ds)
