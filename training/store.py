"""Trajectory store: one Parquet shard per (step, role) under ``runs/<name>/trajectories/``.

Shards are written atomically (temp file + rename), so a reader -- a trainer, a notebook -- never sees a
half-written file. Every shard has the one schema of :func:`sesa_graph.trajectory.arrow_schema` (its version in
the schema metadata), so ``datasets.load_dataset("parquet", data_files="runs/NAME/trajectories/*/*.parquet")``
and ``pyarrow.dataset`` read a whole run; shards of older runs, each with the types its own rows implied, are
read through :func:`conform`.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from sesa_graph.fsutil import write_bytes_atomic
from sesa_graph.trajectory import Trajectory, arrow_schema

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
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.path(step, role)
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist([r.model_dump() for r in records], schema=arrow_schema())
        buf = io.BytesIO()
        with pq.ParquetWriter(buf, table.schema) as writer:
            if table.num_rows:  # an empty shard has no row group: datasets refuses a row group of 0 rows
                writer.write_table(table)
        return write_bytes_atomic(path, buf.getvalue())

    def exists(self, step: int, role: str) -> bool:
        return self.path(step, role).exists()

    def read(self, step: int, role: str) -> pd.DataFrame:
        path = self.path(step, role)
        if not path.exists():
            raise FileNotFoundError(f"no {role} trajectories for step {step} ({path})")
        return conform(path).to_pandas()

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


def conform(path: Path) -> Any:
    """A shard as an Arrow table of today's schema: an older shard's null-typed columns cast, missing columns
    added as nulls, columns it has beyond the schema kept after them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table, schema = pq.read_table(path), arrow_schema()
    if table.schema.equals(schema, check_metadata=False):
        return table
    columns, fields = [], []
    for f in schema:
        have = table.column(f.name) if f.name in table.column_names else pa.nulls(len(table), f.type)
        columns.append(have.cast(f.type))
        fields.append(f.with_nullable(True))
    extra = [n for n in table.column_names if n not in schema.names]
    columns += [table.column(n) for n in extra]
    fields += [table.schema.field(n) for n in extra]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=schema.metadata))
