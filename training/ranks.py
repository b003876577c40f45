"""One trainer rank's place in its job: who it is (the launcher's RANK / WORLD_SIZE), its own log, the start-up
check that every rank of the job came up, and the watchdog that ends it when ``sesa train`` is gone.

The watchdog is what bounds orphans under any launcher: a launcher's agent is the ranks' parent, so
``getppid()`` cannot see ``sesa train`` die; the orchestrator's pid and kernel start time (passed by
``training.trainer_jobs``) can.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from training.sync import PeerDiedError
from training.trainer_jobs import process_start_time, rank_log

log = logging.getLogger("sesa.trainer")
WATCH_INTERVAL_S = 1.0


@dataclass(frozen=True)
class Rank:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def this_rank() -> Rank:
    """This process's rank and world size, as torchrun / accelerate set them (one process: 0 of 1)."""
    return Rank(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")))


def use_own_log(job_log: Path, rank: Rank) -> None:
    """Ranks other than 0 write to a log of their own (rank 0 keeps the job's), so a failure names one file."""
    if rank.main:
        return
    own = rank_log(job_log, rank.rank)
    own.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(own, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def join(
    sync_root: Path, role: str, rank: Rank, job_log: Path, timeout_s: float, poll_s: float = 0.2
) -> None:
    """Mark this rank as started and wait until every rank of the job has; a rank missing after ``timeout_s``
    is named (with its log) instead of leaving the others in a collective until torch's own 30-minute timeout.
    Markers are per launch (``SESA_TRAINER_LAUNCH``), so a resumed run does not count the last attempt's."""
    launch = os.environ.get("SESA_TRAINER_LAUNCH", "manual")
    where = sync_root / "join" / f"{role}-{launch}"
    where.mkdir(parents=True, exist_ok=True)
    (where / f"rank{rank.rank}").write_text(f"{os.getpid()}\n")
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [r for r in range(rank.world) if not (where / f"rank{r}").exists()]
        if not missing:
            return
        if time.monotonic() > deadline:
            logs = ", ".join(str(rank_log(job_log, r)) for r in missing)
            raise PeerDiedError(
                f"the {role} trainer's rank(s) {missing} of {rank.world} did not start within {timeout_s:.0f}s "
                f"(train.join_timeout_s); see {logs}"
            )
        time.sleep(poll_s)


def orchestrator_gone() -> str | None:
    """Why the ``sesa train`` that started this job is gone, or None while it runs (or when none did)."""
    pid = os.environ.get("SESA_ORCHESTRATOR_PID")
    if not pid:
        return None
    start = process_start_time(int(pid))
    if start is None or start != os.environ.get("SESA_ORCHESTRATOR_START", start):
        return f"the orchestrator (sesa train, pid {pid}) is gone"
    return None


def start_watchdog(role: str, rank: Rank, interval_s: float = WATCH_INTERVAL_S) -> None:
    """End this rank within ``interval_s`` of the orchestrator's death, even in the middle of an update."""

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if (why := orchestrator_gone()) is not None:
                log.error("%s: stopping the %s trainer's rank %d", why, role, rank.rank)
                sys.stdout.flush()
                sys.stderr.flush()
                logging.shutdown()
                os._exit(3)

    threading.Thread(target=watch, name="orchestrator-watchdog", daemon=True).start()
