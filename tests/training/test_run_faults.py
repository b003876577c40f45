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


def test_a_missing_commit_record_or_a_truncated_shard_is_named_with_its_file(tmp_path):
    """A resumed trainer's replay read a truncated shard as '<Buffer>' and a missing record as a raw [Errno 2]."""
    import pytest

    from training.orchestrator import Orchestrator
    from training.store import TrajectoryStore
    from training.sync import SyncDir, SyncFileError

    sync = SyncDir(tmp_path)
    with pytest.raises(SyncFileError, match="committed-3.json is missing: step 3's commit record"):
        sync.committed(3)
    (sync.root / "committed-3.json").write_text('{"step": 3}')
    store = TrajectoryStore(tmp_path)
    shard = store.path(3, "solver")
    shard.parent.mkdir(parents=True, exist_ok=True)
    shard.write_bytes(b"PAR1\x00\x00truncated")
    orch = Orchestrator.__new__(Orchestrator)  # only the run's record: no servers, no trainers
    orch.sync, orch.store = sync, store
    with pytest.raises(SyncFileError, match=r"solver.parquet cannot be read .*step 3's committed solver"):
        orch.replay("solver", 3)
