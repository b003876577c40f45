"""A run stopped by a full disk: what the error path writes (STOP.json, the attempt's end) fails too, and must
neither raise over the first error nor hide it."""

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
