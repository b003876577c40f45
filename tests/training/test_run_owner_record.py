"""The config a run recorded (training.config_record) follows every write the run makes to config.yaml, so
only hand edits are refused on --resume; a second owner of a run is refused before anything is written."""

from __future__ import annotations

import json

import pytest
import yaml

from sesa_graph.fsutil import dump_yaml
from training.config_record import RECORD, check_recorded, record_config
from training.launch import prepare_run
from training.resume import ResumeError, prepare_resume
from training.run_owner import RunInUseError, lock_run

from .resume_fixtures import make_run


def test_a_set_applied_on_resume_is_recorded_so_the_next_resume_sees_no_edit(tmp_path):
    run = make_run(tmp_path)
    record_config(run)
    prepare_resume(run, {"train.steps": 7}, {"train.steps": "--steps"})
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["steps"] == 7
    assert check_recorded(run) is None
    assert json.loads((run / RECORD).read_text())["config"]["train"]["steps"] == 7


def test_a_run_without_a_record_is_taken_as_it_is_and_recorded(tmp_path):
    run = make_run(tmp_path)
    r = prepare_resume(run)
    assert any("no recorded settings" in n for n in r.notes)
    assert check_recorded(run) is None


def test_a_hand_edit_is_refused_naming_the_key_and_writes_nothing(tmp_path):
    run = make_run(tmp_path)
    record_config(run)
    data = yaml.safe_load((run / "config.yaml").read_text())
    data["solver"]["max_turns"] = 9
    (run / "config.yaml").write_text(dump_yaml(data))
    before = (run / "metrics.jsonl").read_bytes()
    with pytest.raises(ResumeError, match=r"solver\.max_turns: recorded \d+, the file has 9") as e:
        prepare_resume(run)
    assert "--set KEY=VALUE" in str(e.value)
    assert (run / "metrics.jsonl").read_bytes() == before and not (run / "superseded").exists()


def test_a_second_owner_is_refused_before_the_resume_touches_the_run(tmp_path):
    run = make_run(tmp_path)
    with lock_run(run):
        before = sorted(p.name for p in run.rglob("*"))
        with pytest.raises(RunInUseError, match=r"is in use by pid \d+: .* since "):
            prepare_run(None, tmp_path / "runs", run)
        assert sorted(p.name for p in run.rglob("*")) == before
    _, got, _, lock = prepare_run(None, tmp_path / "runs", run)  # free again: taken
    assert got == run.resolve() and lock.held
    lock.release()
