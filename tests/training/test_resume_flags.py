"""Flags given with --resume are applied when safe or refused naming the flag, never ignored; a path that is
not a run, or a damaged run file, is one UserError naming the file (hand-made run directories)."""

from __future__ import annotations

import pytest

from tools.errors import UserError
from training.resume import prepare_resume

from .resume_fixtures import make_run


def test_steps_extend_and_cannot_shorten(tmp_path):
    run = make_run(tmp_path, steps=5, committed=3)
    with pytest.raises(UserError, match=r"--steps 2 is below the 3 steps .* has committed"):
        prepare_resume(run, {"train.steps": 2}, {"train.steps": "--steps"})
    assert "resume" not in (run / "metrics.jsonl").read_text()  # a refused resume writes nothing
    assert prepare_resume(run, {"train.steps": 9}, {"train.steps": "--steps"}).cfg.train.steps == 9


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_a_budget_bound_schedule_refuses_a_changed_step_budget(tmp_path, schedule):
    run = make_run(tmp_path, steps=5, committed=3, lr_scheduler=schedule)
    with pytest.raises(
        UserError, match=rf"--steps 9 cannot change the step budget .* train\.lr_scheduler={schedule}"
    ):
        prepare_resume(run, {"train.steps": 9}, {"train.steps": "--steps"})
    assert "resume" not in (run / "metrics.jsonl").read_text()
    # the same budget resumes
    assert prepare_resume(run, {"train.steps": 5}, {"train.steps": "--steps"}).cfg.train.steps == 5


def test_a_setting_the_run_learned_with_is_refused_naming_the_flag(tmp_path):
    run = make_run(tmp_path, memory_mode="on")
    with pytest.raises(
        UserError, match=r"--bank cannot change on --resume: .* started with memory\.mode=\"on\""
    ):
        prepare_resume(run, {"memory.mode": "off"}, {"memory.mode": "--bank"})
    with pytest.raises(UserError, match=r"--set solver\.max_turns cannot change on --resume"):
        prepare_resume(run, {"solver.max_turns": 9})
    assert not (run / "superseded").exists()


def test_a_flag_equal_to_the_stored_value_and_a_safe_one_are_applied(tmp_path):
    run = make_run(tmp_path, memory_mode="on")
    r = prepare_resume(
        run,
        {"memory.mode": "on", "train.wait_timeout_s": 60, "search.timeout_s": 5},
        {"memory.mode": "--bank"},
    )
    assert {k: new for k, (_, new) in r.changed.items()} == {
        "train.wait_timeout_s": 60,
        "search.timeout_s": 5,
    }
    assert r.cfg.train.wait_timeout_s == 60 and any("applied:" in n for n in r.notes)


def test_an_invalid_flag_value_names_the_flag_not_the_stored_config(tmp_path):
    run = make_run(tmp_path)
    with pytest.raises(UserError, match="a flag given with --resume") as e:
        prepare_resume(run, {"train.wait_timeout_s": -1})
    assert "wait_timeout_s" in str(e.value)


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda run: (run / "config.yaml").unlink(), "config.yaml is missing"),
        (lambda run: (run / "config.yaml").write_text("train: [unclosed\n"), "config.yaml (the run's stored"),
        (lambda run: (run / "config.yaml").write_bytes(b"\xff\xfe"), "config.yaml (the run's stored"),
        (lambda run: (run / "reuse_pool.json").write_text("{oops"), "reuse_pool.json is damaged"),
        (lambda run: (run / "reuse_pool.json").write_text("[1, 2]"), "reuse_pool.json is damaged"),
    ],
)
def test_a_damaged_run_is_one_user_error_naming_the_file(tmp_path, damage, named):
    run = make_run(tmp_path)
    damage(run)
    with pytest.raises(UserError, match=named.replace("(", r"\(")):
        prepare_resume(run)


def test_a_path_that_is_not_a_run(tmp_path):
    with pytest.raises(UserError, match="no such directory"):
        prepare_resume(tmp_path / "nope")
    with pytest.raises(UserError, match="not a run directory, config.yaml is missing"):
        prepare_resume(tmp_path)


def test_the_cli_refuses_runs_dir_and_a_differing_config_with_resume(tmp_path):
    from typer.testing import CliRunner

    from sesa_cli.main import build_app

    run = make_run(tmp_path)
    app = build_app()
    res = CliRunner().invoke(app, ["train", "--resume", str(run), "--runs-dir", str(tmp_path)])
    assert res.exit_code == 2 and "--runs-dir cannot be given with --resume" in _out(res)
    cfg = tmp_path / "other.yaml"
    cfg.write_text("name: r\ntrain:\n  steps: 5\n  learning_rate: 0.5\nmemory:\n  mode: 'on'\n")
    res = CliRunner().invoke(app, ["train", "--resume", str(run), "--config", str(cfg)])
    assert res.exit_code == 2
    assert f"--config {cfg} (train.learning_rate) cannot change on --resume" in _out(res)
    assert "resume" not in (run / "metrics.jsonl").read_text()


def _out(res) -> str:
    try:
        return res.output + res.stderr
    except ValueError:  # click without a separate stderr
        return res.output
