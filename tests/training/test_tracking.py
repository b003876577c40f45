"""train.report_to: trackers are checked before a run starts, and each step's record reaches TensorBoard."""

import importlib.util

import pytest

from tools.errors import UserError
from training.tracking import StepTracker, check_tracker, scalars, tensorboard_dir


def test_unknown_or_missing_trackers_are_user_errors(monkeypatch):
    check_tracker("none")
    with pytest.raises(UserError, match="train.report_to is 'mlflow'"):
        check_tracker("mlflow")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "trackio" else real(n, *a))
    with pytest.raises(UserError, match="trackio package is not installed: pip install trackio"):
        check_tracker("trackio")


def test_scalars_flatten_numbers_and_drop_the_rest():
    rec = {
        "step": 3,
        "solver_reward": 0.25,
        "ok": True,
        "note": "x",
        "phases": {"rollout": 1.5},
        "nan": float("nan"),
    }
    assert scalars(rec) == {"step": 3.0, "solver_reward": 0.25, "ok": 1.0, "phases/rollout": 1.5}


def test_step_records_reach_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    t = StepTracker(tmp_path, "tensorboard", "r")
    t.log_step({"step": 0, "solver_reward": 0.1, "phases": {"rollout": 2.0}})
    t.log_step({"final_consolidation": {"admitted": 3}})  # not a step: not plotted
    t.log_step(
        {"step": 1, "solver_reward": 0.3, "phases": {"rollout": 1.0}, "updates": {"solver": {"loss": 0.5}}}
    )
    t.close()
    acc = EventAccumulator(str(tensorboard_dir(tmp_path, "selfplay")))
    acc.Reload()
    # on TRL's axis: step t beside the update that trained on its batch (global step t+1)
    assert [(e.step, round(e.value, 3)) for e in acc.Scalars("selfplay/solver_reward")] == [
        (1, 0.1),
        (2, 0.3),
    ]
    assert "selfplay/phases/rollout" in acc.Tags()["scalars"]
    assert not any("updates" in t for t in acc.Tags()["scalars"])  # TRL's own writers plot them
