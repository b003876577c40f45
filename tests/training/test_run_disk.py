"""`sesa runs --prune NAME`: a finished run loses only what extending it needs (checkpoints/, superseded/),
is listed as pruned, and a later --resume of it is refused by name; a run that is not finished keeps all."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sesa_cli.main import build_app
from training import run_life
from training.resume import ResumeError, prepare_resume
from training.run_disk import footprint


def _finished_run(tmp_path, name="r"):
    run = tmp_path / "runs" / name
    (run / "logs").mkdir(parents=True)
    (run / "config.yaml").write_text(f"name: {name}\ntrain: {{steps: 1}}\n")
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0}) + "\n")
    ckpt = run / "checkpoints" / "solver" / "checkpoint-1"
    ckpt.mkdir(parents=True)
    (ckpt / "optimizer.pt").write_bytes(b"\0" * 3_000_000)
    (run / "superseded" / "attempt-1").mkdir(parents=True)
    (run / "superseded" / "attempt-1" / "old.jsonl").write_text("{}\n")
    (run / "policies" / "solver").mkdir(parents=True)
    (run / "policies" / "solver" / "model.safetensors").write_bytes(b"\0" * 1000)
    run_life.begin(run, 0)
    run_life.end(run, "finished")
    return run


def test_prune_keeps_the_results_and_a_resume_of_it_is_refused_by_name(tmp_path):
    run = _finished_run(tmp_path)
    assert footprint(run)["checkpoints"] == 3_000_000
    out = CliRunner().invoke(build_app(), ["runs", "--runs-dir", str(tmp_path / "runs"), "--prune", "r"])
    assert out.exit_code == 0, out.output
    assert "pruned r: 0.00 GiB freed" in out.output and "(pruned)" in out.output
    assert not (run / "checkpoints").exists() and not (run / "superseded").exists()
    assert (run / "policies" / "solver" / "model.safetensors").exists() and (run / "metrics.jsonl").exists()
    record = json.loads((run / "PRUNED.json").read_text())
    assert record["removed"] == ["checkpoints", "superseded"] and record["freed_bytes"] > 3_000_000
    with pytest.raises(ResumeError, match="pruned .*policies"):
        prepare_resume(run, {"train.steps": 2})


def test_a_run_that_is_not_finished_is_not_pruned_and_an_unknown_name_is_named(tmp_path):
    run = _finished_run(tmp_path)
    run_life.begin(run, 1)
    run_life.end(run, "stopped", "ServiceError: the judge endpoint is down")
    app, runs = build_app(), str(tmp_path / "runs")
    out = CliRunner().invoke(app, ["runs", "--runs-dir", runs, "--prune", "r"])
    assert out.exit_code != 0 and "not finished" in out.output and "--resume" in out.output
    assert (run / "checkpoints" / "solver" / "checkpoint-1" / "optimizer.pt").exists()
    out = CliRunner().invoke(app, ["runs", "--runs-dir", runs, "--prune", "nope"])
    assert out.exit_code != 0 and "--prune nope" in out.output
