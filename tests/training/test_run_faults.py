"""Faults of a live run: a full disk (what the error path writes fails too, and must neither raise over the
first error nor hide it), and weights that an update filled with NaN (never published)."""

from __future__ import annotations

import errno
import logging

from training import run_life, sync


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_the_stop_marker_and_the_attempt_end_fail_with_a_warning_not_a_second_traceback(
    tmp_path, monkeypatch, caplog
):
    run = tmp_path / "run"
    run_life.begin(run, 0)
    monkeypatch.setattr(sync, "_touch_json", _full)
    monkeypatch.setattr(run_life, "write_json_atomic", _full)
    with caplog.at_level(logging.WARNING):
        sync.SyncDir(run).stop("OSError: [Errno 28] No space left on device")
        run_life.end(run, "stopped", "OSError: [Errno 28] No space left on device")
    assert "could not write" in caplog.text and "STOP.json" in caplog.text
    assert "could not record the attempt's end" in caplog.text


def test_weights_holding_nan_are_not_published_and_the_error_names_the_tensor():
    import pytest
    import torch

    from tools.errors import UserError
    from training.step_feed import check_finite

    good = {"a.weight": torch.ones(3), "steps": torch.tensor([1])}
    check_finite(good, "solver", 2)
    bad = {**good, "b.weight": torch.tensor([1.0, float("nan")])}
    with pytest.raises(UserError, match=r"step 2: the solver trainer's weights hold NaN or inf \(b.weight"):
        check_finite(bad, "solver", 2)
