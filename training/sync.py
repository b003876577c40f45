"""File-based barrier between the orchestrator and the two trainer processes (CPU weight transport).

Per step t and role:
1. the trainer publishes its current weights as version t (``weights/<role>/``, safetensors, atomic
   directory swap) and writes ``ready-<role>-<t>``: "weights synced for step t";
2. the orchestrator waits for both ready markers, reloads its rollout policies, runs the self-play step,
   writes both roles' shards and then ``committed-<t>.json`` (metrics) -- the commit point of the step;
3. each trainer waits for ``committed-<t>.json`` and trains on its role's shard.
Every wait checks that the other side is alive, so a dead process ends the run instead of hanging it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sesa_graph.fsutil import write_json_atomic
from tools.errors import ServiceError


class PeerDiedError(ServiceError, RuntimeError):
    """The process on the other side of the barrier is gone."""


class SyncDir:
    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.root = self.run_dir / "sync"
        self.root.mkdir(parents=True, exist_ok=True)

    # ---- trainer side -------------------------------------------------------------------------------
    def weights_dir(self, role: str) -> Path:
        return self.root / "weights" / role

    def publish_weights(self, role: str, step: int, save: Callable[[Path], None]) -> Path:
        """``save(tmp_dir)`` writes safetensors; the directory replaces the previous version atomically."""
        final = self.weights_dir(role)
        tmp = final.with_name(f".{role}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save(tmp)
        (tmp / "VERSION").write_text(str(step))
        old = final.with_name(f".{role}.old")
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
        return final

    def clear_weights(self) -> None:
        """Drop the published weights once a run has finished: ``policies/`` holds the final ones, and the
        copies would otherwise keep about 4 bytes per parameter per role on disk."""
        shutil.rmtree(self.root / "weights", ignore_errors=True)

    def weights_version(self, role: str) -> int | None:
        f = self.weights_dir(role) / "VERSION"
        return int(f.read_text()) if f.exists() else None

    def mark_ready(self, role: str, step: int) -> None:
        _touch_json(
            self.root / f"ready-{role}-{step}.json", {"step": step, "time": time.time(), "pid": os.getpid()}
        )

    def is_ready(self, role: str, step: int) -> bool:
        return (self.root / f"ready-{role}-{step}.json").exists()

    # ---- orchestrator side --------------------------------------------------------------------------
    def commit(self, step: int, metrics: dict[str, Any]) -> None:
        _touch_json(self.root / f"committed-{step}.json", metrics)

    def committed(self, step: int) -> dict[str, Any]:
        return json.loads((self.root / f"committed-{step}.json").read_text())

    def is_committed(self, step: int) -> bool:
        return (self.root / f"committed-{step}.json").exists()

    def committed_steps(self) -> list[int]:
        return sorted(int(p.stem.split("-")[1]) for p in self.root.glob("committed-*.json"))

    def stop(self, reason: str) -> None:
        _touch_json(self.root / "STOP.json", {"reason": reason})

    def stopped(self) -> str | None:
        f = self.root / "STOP.json"
        return json.loads(f.read_text())["reason"] if f.exists() else None

    def wait(
        self,
        cond: Callable[[], bool],
        what: str,
        timeout_s: float,
        alive: Callable[[], str | None] | None = None,
        poll_s: float = 0.2,
    ) -> None:
        """Block until ``cond()``; raise if ``alive()`` names a dead peer, on STOP, or after the timeout."""
        deadline = time.monotonic() + timeout_s
        while not cond():
            reason = self.stopped()
            if reason:
                raise PeerDiedError(f"run stopped while waiting for {what}: {reason}")
            if alive is not None and (dead := alive()):
                raise PeerDiedError(f"{dead} while waiting for {what}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout_s:.0f}s for {what}")
            time.sleep(poll_s)


def _touch_json(path: Path, obj: Any) -> None:
    write_json_atomic(path, obj)
