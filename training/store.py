"""Trajectory store: one Parquet shard per (step, role) under ``runs/<name>/trajectories/``.

Shards are written atomically (temp file + rename), so a reader -- a trainer, a notebook -- never sees a
half-written file; ``pandas.read_parquet`` and ``datasets.load_dataset("parquet", ...)`` read them as is.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from sesa_graph.fsutil import write_bytes_atomic
from sesa_graph.trajectory import Trajectory

ROLES = ("proposer", "solver")


class TrajectoryStore:
    def __init__(self, run_dir: str | Path) -> None:
        self.root = Path(run_dir) / "trajectories"
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, step: int, role: str) -> Path:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        return self.root / f"step-{step:05d}" / f"{role}.parquet"

    def write(self, step: int, role: str, records: Iterable[Trajectory]) -> Path:
        path = self.path(step, role)
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [r.model_dump() for r in records]
        df = pd.DataFrame(rows, columns=list(Trajectory.model_fields)) if not rows else pd.DataFrame(rows)
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        return write_bytes_atomic(path, buf.getvalue())

    def exists(self, step: int, role: str) -> bool:
        return self.path(step, role).exists()

    def read(self, step: int, role: str) -> pd.DataFrame:
        path = self.path(step, role)
        if not path.exists():
            raise FileNotFoundError(f"no {role} trajectories for step {step} ({path})")
        return pd.read_parquet(path)

    def steps(self) -> list[int]:
        return sorted(int(p.name.split("-")[1]) for p in self.root.glob("step-*") if any(p.glob("*.parquet")))

    def read_all(self, role: str | None = None) -> pd.DataFrame:
        frames = [
            self.read(s, r) for s in self.steps() for r in ((role,) if role else ROLES) if self.exists(s, r)
        ]
        return (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame(columns=list(Trajectory.model_fields))
        )
