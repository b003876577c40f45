"""One trainer's update at a time on this machine (``train.one_update_at_a_time``).

On a CPU run the two trainers get a step's trajectories at the same moment, and each update's transient
memory -- the AdamW moments' update, the gradients, a pass's activations, all kept by the allocator until the
trainer gives them back while it waits for the next step -- came on top of the other's: 4.5 and 4.9 GiB PSS
at once in the default run, 2.1 GiB each at rest. On 2 cores the two updates only share the cores anyway,
so taking turns costs little time and keeps one update's transient in the run's peak instead of two.

A turn is an exclusive ``flock`` on ``sync/update.lock`` in the run directory: taken when the step's
trajectories have arrived, given back once the update is done and its freed memory returned to the kernel
(at the next step's start, or when the process ends: the kernel drops the lock of a killed trainer too).
Only for single-rank trainers on one machine: ranks of a job must update together.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

log = logging.getLogger("sesa.trainer")


class UpdateTurn:
    """An exclusive turn to update, shared by the trainers of one run through ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def take(self) -> float:
        """Wait for the turn and hold it; the seconds waited."""
        if self._fd is not None:
            return 0.0
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        t0 = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for the other trainer's update to finish (train.one_update_at_a_time)")
            fcntl.flock(fd, fcntl.LOCK_EX)
        self._fd = fd
        return time.monotonic() - t0

    def give(self) -> None:
        """Give the turn back (nothing when not held)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None
