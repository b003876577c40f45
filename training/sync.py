"""The orchestrator's durable record of a run's barrier, under ``runs/NAME/sync/``.

The live barrier (ready / commit / stop signals, trajectory shards and heartbeats between the orchestrator and
the trainer jobs) is ``training.coordinator``: a network store, so trainers on other nodes need no shared
filesystem. What stays on disk here is what must outlive the processes:
- ``committed-<t>.json``: step t's metrics, written once its shards are on disk -- ``--resume`` restarts at the
  first step without one, and replays committed steps to a trainer resumed from an older checkpoint;
- ``STOP.json``: why a run stopped, for the person reading the run directory;
- ``weights/<role>/``: the weights the rollout policies load (``cluster.weights: file``, written by the
  trainer's rank 0; ``store``, fetched from the coordinator onto the orchestrator's disk), swapped atomically.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sesa_graph.fsutil import replace_dir, write_json_atomic
from tools.errors import ServiceError, UserError
from tools.terminal import shown

_COMMITTED = re.compile(r"committed-(\d{1,9})\.json")


class SyncFileError(UserError, ValueError):
    """A damaged file under ``runs/NAME/sync/``; the message names it."""


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
        return replace_dir(tmp, final)

    def clear_weights(self) -> None:
        """Drop the published weights once a run has finished: ``policies/`` holds the final ones, and the
        copies would otherwise keep about 4 bytes per parameter per role on disk."""
        shutil.rmtree(self.root / "weights", ignore_errors=True)

    def weights_version(self, role: str) -> int | None:
        f = self.weights_dir(role) / "VERSION"
        return int(f.read_text()) if f.exists() else None

    # ---- orchestrator side --------------------------------------------------------------------------
    def commit(self, step: int, metrics: dict[str, Any]) -> None:
        _touch_json(self.root / f"committed-{step}.json", metrics)

    def committed(self, step: int) -> dict[str, Any]:
        path = self.root / f"committed-{step}.json"
        try:
            rec = json.loads(path.read_text())
        except FileNotFoundError:
            raise SyncFileError(
                f"{path} is missing: step {step}'s commit record, which the run's later records count on; restore "
                f"it from a backup, or move every later committed-*.json out of {self.root} to run those steps again"
            ) from None
        except (UnicodeDecodeError, ValueError) as exc:
            rec = exc
        if not isinstance(rec, dict):
            why = f"not a JSON object ({shown(rec, 120, one_line=True)})"
            raise SyncFileError(
                f"{path} is damaged: {why}. It is step {step}'s commit record; restore it from a backup, or move "
                f"it and every later committed-*.json out of {self.root} to run those steps again"
            )
        return rec

    def is_committed(self, step: int) -> bool:
        return (self.root / f"committed-{step}.json").exists()

    def committed_steps(self) -> list[int]:
        """The committed steps; a file named like a commit record but not one (``committed-x.json``) is no
        step (:meth:`strays` names them)."""
        return sorted(
            int(m.group(1)) for p in self.root.glob("committed-*.json") if (m := _COMMITTED.fullmatch(p.name))
        )

    def strays(self) -> list[str]:
        """Names of files that look like commit records but are not, ignored by :meth:`committed_steps`."""
        return sorted(p.name for p in self.root.glob("committed-*") if not _COMMITTED.fullmatch(p.name))

    def stop(self, reason: str) -> None:
        """Tell file-watching trainers to stop. Best effort: it is written while the run is being stopped,
        perhaps because the disk is full, and the coordinator tells them too."""
        try:
            _touch_json(self.root / "STOP.json", {"reason": reason})
        except OSError as exc:
            logging.getLogger(__name__).warning("could not write %s: %s", self.root / "STOP.json", exc)

    def stopped(self) -> str | None:
        f = self.root / "STOP.json"
        return json.loads(f.read_text())["reason"] if f.exists() else None


def _touch_json(path: Path, obj: Any) -> None:
    write_json_atomic(path, obj)
