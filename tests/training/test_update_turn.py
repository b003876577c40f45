"""train.one_update_at_a_time: two trainer processes of one run never hold the update turn at once, and a
killed holder does not block the other (the kernel drops its flock)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from training.update_turn import UpdateTurn

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from training.update_turn import UpdateTurn
    turn = UpdateTurn(Path(sys.argv[1]))
    turn.take()
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
    turn.give()
    print("given", flush=True)
    time.sleep(60)
    """
)


def _holder(path, hold_s):
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(hold_s)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "holding"
    return p


def test_the_second_trainer_waits_for_the_first_to_give_the_turn_back(tmp_path):
    lock = tmp_path / "update.lock"
    first = _holder(lock, 1.5)
    try:
        mine = UpdateTurn(lock)
        waited = mine.take()
        assert first.stdout.readline().strip() == "given"  # it gave the turn back before this one got it
        assert waited > 0.5 and mine.held
        mine.give()
        assert not mine.held and mine.take() < 0.5  # free again at once
        mine.give()
    finally:
        first.kill()
        first.wait()


def test_a_killed_holder_does_not_block_the_other(tmp_path):
    lock = tmp_path / "update.lock"
    first = _holder(lock, 600)
    t0 = time.monotonic()
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    mine = UpdateTurn(lock)
    mine.take()
    assert time.monotonic() - t0 < 30 and mine.held
    mine.give()
