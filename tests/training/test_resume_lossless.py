"""--resume never deletes or rewrites a line of metrics.jsonl and sets aside, never deletes, what an
interrupted attempt left (hand-made run directories; no training runs)."""

from __future__ import annotations

import json

import pytest

from sesa_runs import load
from training.metrics_log import append_record, read_metrics
from training.resume import prepare_resume

from .resume_fixtures import make_run


def test_resume_appends_a_marker_and_readers_take_the_latest_attempt(tmp_path):
    run = make_run(tmp_path, committed=3, uncommitted_line=True)
    before = (run / "metrics.jsonl").read_bytes()
    r = prepare_resume(run)
    assert r.start == 3
    assert (run / "metrics.jsonl").read_bytes().startswith(before)  # nothing rewritten
    assert load.open_run(run).steps() == [0, 1, 2]  # step 3's record belongs to the killed attempt
    append_record(run, {"step": 3, "attempt": 2})  # the step run again
    m = load.open_run(run).metrics()
    assert list(m["step"]) == [0, 1, 2, 3] and m.set_index("step").loc[3, "attempt"] == 2
    aside = run / "superseded" / "attempt-2"
    assert (aside / "trajectories" / "step-00003" / "solver.parquet").read_bytes() == b"PAR1 step 3"
    assert (aside / "failures" / "step-000003.jsonl").is_file() and (aside / "sync" / "STOP.json").is_file()
    assert (
        not (run / "trajectories" / "step-00003").exists() and (run / "trajectories" / "step-00002").exists()
    )
    assert json.loads((aside / "reuse_pool.json").read_text())[-1]["step"] == 3


def test_a_second_resume_counts_its_attempt(tmp_path):
    run = make_run(tmp_path)
    prepare_resume(run)
    prepare_resume(run)
    assert [r["attempt"] for r in read_metrics(run).resumes] == [2, 3]


def test_nothing_to_resume_writes_nothing(tmp_path):
    run = make_run(tmp_path, steps=3, committed=3, uncommitted_line=False, final=True)
    before = (run / "metrics.jsonl").read_bytes()
    r = prepare_resume(run)
    assert r.start == 3 and r.cfg.train.steps == 3
    assert (run / "metrics.jsonl").read_bytes() == before
    assert load.open_run(run).final_consolidation == {"version": 2, "admitted": 1, "rejected": 0}
    assert not (run / "superseded").exists() and (run / "summary.json").exists()


def test_a_torn_last_line_is_skipped_reported_and_sealed(tmp_path):
    run2 = make_run(tmp_path, torn=b'{"step": 4, "val')
    r = prepare_resume(run2)
    assert any("last line torn (16 bytes), skipped" in n for n in r.notes)
    assert (run2 / "metrics.jsonl").read_bytes().endswith(b"\n")
    append_record(run2, {"step": 3, "attempt": 2})
    log = read_metrics(run2)
    assert log.sealed_torn == 1 and log.steps == [0, 1, 2, 3]
    assert load.open_run(run2).steps() == [0, 1, 2, 3]


def test_an_unsealed_bad_middle_line_is_still_an_error_naming_the_line(tmp_path):
    run = make_run(tmp_path)
    text = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join([text[0], "garbage", *text[1:]]) + "\n")
    with pytest.raises(Exception, match=r"metrics\.jsonl:2: not valid JSON"):
        prepare_resume(run)


def test_extending_a_finished_run_sets_its_results_aside(tmp_path):
    run = make_run(tmp_path, steps=3, committed=3, uncommitted_line=False, final=True)
    r = prepare_resume(run, {"train.steps": 5}, {"train.steps": "--steps"})
    assert (r.start, r.cfg.train.steps) == (3, 5)
    assert load.open_run(run).config["train"]["steps"] == 5
    aside = run / "superseded" / "attempt-2"
    assert (aside / "summary.json").is_file() and (aside / "policies" / "solver" / ".complete").is_file()
    assert read_metrics(run).resumes[0]["changed"] == {"train.steps": [3, 5]}
    append_record(run, {"step": 3})
    # the consolidation committed after step 2 is history once step 3 ran
    assert load.open_run(run).final_consolidation is None
    assert read_metrics(run).others[0][1]["final_consolidation"]["version"] == 2
