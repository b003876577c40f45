"""One trainer rank's place in its job: who it is (the launcher's RANK / WORLD_SIZE), its own log, the job's
own store (start-up check that every rank came up, the config handed from rank 0, heartbeats between ranks on
different nodes), and the watchdog that ends a local job when ``sesa train`` is gone.

The watchdog is what bounds orphans under any launcher: a launcher's agent is the ranks' parent, so
``getppid()`` cannot see ``sesa train`` die; the orchestrator's pid and kernel start time (passed by
``training.trainer_jobs``) can.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
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


class JobStore:
    """The launcher's own store (``MASTER_ADDR:MASTER_PORT``, hosted by the agent on the job's first node): the
    ranks of one job meet there before their process group exists, rank 0 hands the others the run's config,
    and each rank's heartbeat lets the others notice a node that is gone. Nothing here talks to the
    orchestrator: only rank 0 does (``training.coordinator``)."""

    def __init__(self, rank: Rank, timeout_s: float) -> None:
        from torch.distributed import TCPStore

        self.rank = rank
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        self.store = TCPStore(
            host, port, is_master=False, wait_for_workers=False, timeout=timedelta(seconds=timeout_s)
        )
        self._beats = TCPStore(
            host, port, is_master=False, wait_for_workers=False, timeout=timedelta(seconds=30)
        )

    def join(self, role: str, job_log: Path, timeout_s: float, poll_s: float = 0.2) -> None:
        """Mark this rank as started and wait until every rank of the job has; a rank missing after
        ``timeout_s`` is named (with its log) instead of leaving the others in a collective until torch's own
        30-minute timeout."""
        me = f"{socket.gethostname()} pid {os.getpid()}"
        self.store.set(f"sesa/join/rank{self.rank.rank}", me)
        deadline = time.monotonic() + timeout_s
        while True:
            missing = [r for r in range(self.rank.world) if not self.store.check([f"sesa/join/rank{r}"])]
            if not missing:
                return
            if time.monotonic() > deadline:
                logs = ", ".join(str(rank_log(job_log, r)) for r in missing)
                raise PeerDiedError(
                    f"the {role} trainer's rank(s) {missing} of {self.rank.world} did not start within "
                    f"{timeout_s:.0f}s (train.join_timeout_s); see {logs} on their node(s)"
                )
            time.sleep(poll_s)

    def share(self, key: str, value: str | None) -> str:
        """Rank 0 gives ``value``; every rank gets it."""
        if self.rank.main:
            assert value is not None
            self.store.set(f"sesa/{key}", value)
            return value
        return self.store.get(f"sesa/{key}").decode()

    def where(self, rank: int) -> str:
        key = f"sesa/join/rank{rank}"
        return self._beats.get(key).decode() if self._beats.check([key]) else "?"

    def watch_peers(
        self, role: str, interval_s: float, timeout_s: float, on_lost: Callable[[str], None]
    ) -> None:
        """Beat, and call ``on_lost(message)`` when a peer's beat stops for ``timeout_s`` (rank 0 watches every
        rank, the others watch rank 0) or the launcher's store is gone."""
        from training.coordinator import Watch

        peers = [r for r in range(self.rank.world) if r != self.rank.rank] if self.rank.main else [0]
        watch = Watch(expect=True)  # every rank has joined: one that never beats is gone

        def run() -> None:
            while True:
                try:
                    self._beats.add(f"sesa/hb/rank{self.rank.rank}", 1)
                    for r in peers:
                        stale = watch.stale_for(self._beats, f"sesa/hb/rank{r}")
                        if stale is not None and stale > timeout_s:
                            on_lost(
                                f"the {role} trainer's rank {r} ({self.where(r)}) sent no heartbeat for "
                                f"{stale:.0f}s (cluster.node_timeout_s): its node or process is gone, or hangs"
                            )
                            return
                except Exception as exc:  # noqa: BLE001 - the agent that hosts the store is gone
                    on_lost(f"the {role} trainer job's rendezvous store is gone ({str(exc).splitlines()[0]})")
                    return
                time.sleep(interval_s)

        threading.Thread(target=run, name="rank-heartbeat", daemon=True).start()


def exit_now(message: str) -> None:
    """Log ``message`` and end this rank at once (a rank in a collective would not see an exception)."""
    log.error("%s", message)
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(3)


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
                exit_now(f"{why}: stopping the {role} trainer's rank {rank.rank}")

    threading.Thread(target=watch, name="orchestrator-watchdog", daemon=True).start()
