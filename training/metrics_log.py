"""``metrics.jsonl``, the run's append-only log: how it is appended to and how it is read.

No line of it is ever rewritten or deleted, so one step can have several records: a step killed after its
metrics line but before its commit runs again after ``--resume``. Two kinds of non-step record make the
file readable anyway:

- ``{"resume": {"from_step": s, ...}}``, appended by every resume that runs steps: step records written
  before it for steps >= ``s`` belong to an attempt that never committed them and no longer count;
- ``{"torn_line": {"bytes": n, "line": k}}``, appended right after the newline that closes a torn last
  line (an append cut by a kill): the fragment on line ``k`` is skipped instead of being an error.

A step's learning-curve eval (``training.probe_eval``) finishes after its step record is written, so it
follows as ``{"probe_of": t, "probe": {...}}``: no ``step`` key, so a reader of the raw file counts one line
per step, and :func:`read_metrics` hands it out as step t's ``probe`` (runs from before this wrote step t's
record again with ``probe`` added; the latest one still wins).

Per step the record of the latest attempt counts; every other record (``final_consolidation``, the markers)
is kept, in file order. Everything else follows :func:`sesa_graph.fsutil.parse_jsonl`: a bad line is an
error naming ``file:line`` and a torn last line is skipped and counted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sesa_graph.fsutil import JsonlError

METRICS = "metrics.jsonl"


@dataclass
class MetricsLog:
    """What ``metrics.jsonl`` says once resumes are taken into account."""

    path: Path
    by_step: dict[int, dict[str, Any]] = field(default_factory=dict)
    # non-step records with their position among all records, so "after the last step" can be asked
    others: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    step_pos: dict[int, int] = field(default_factory=dict)
    torn_tail: int = 0  # bytes of an unclosed torn last line (a writer was killed mid-append)
    sealed_torn: int = 0  # torn lines closed by a later append and skipped

    @property
    def rows(self) -> list[dict[str, Any]]:
        """One record per step, by step: the one the latest attempt wrote."""
        return [self.by_step[s] for s in sorted(self.by_step)]

    @property
    def steps(self) -> list[int]:
        return sorted(self.by_step)

    @property
    def resumes(self) -> list[dict[str, Any]]:
        return [r["resume"] for _, r in self.others if isinstance(r.get("resume"), dict)]

    @property
    def final_consolidation(self) -> dict[str, Any] | None:
        """The consolidation committed after the last step: one committed before a later step (a run then
        extended with ``--resume --steps``) is history, not the run's final one."""
        last = max(self.step_pos.values(), default=-1)
        found = [
            r["final_consolidation"] for pos, r in self.others if pos > last and "final_consolidation" in r
        ]
        return found[-1] if found else None


def read_metrics(run_dir: str | Path) -> MetricsLog:
    """``run_dir/metrics.jsonl`` read as the module docstring says (no file: no records)."""
    path = Path(run_dir) / METRICS
    log = MetricsLog(path)
    if not path.is_file():
        return log
    pieces = path.read_bytes().split(b"\n")
    parsed: list[tuple[int, bytes, dict[str, Any] | None, str]] = []
    for n, raw in enumerate(pieces, 1):
        if raw.strip():
            row, bad = _parse(raw)
            parsed.append((n, raw, row, bad))
    pos = 0
    for i, (n, raw, row, bad) in enumerate(parsed):
        if row is None:
            if n == len(pieces):  # no newline after it: an append still being written or cut by a kill
                log.torn_tail = len(raw)
                continue
            nxt = parsed[i + 1][2] if i + 1 < len(parsed) else None
            if nxt is not None and (nxt.get("torn_line") or {}).get("bytes") == len(raw):
                log.sealed_torn += 1
                continue
            raise JsonlError(f"{path}:{n}: {bad}", path=path, line=n, reason=bad)
        pos += 1
        step = row.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            log.by_step[step] = row
            log.step_pos[step] = pos
            continue
        target = row.get("probe_of")
        if isinstance(target, int) and target in log.by_step and isinstance(row.get("probe"), dict):
            log.by_step[target] = {**log.by_step[target], "probe": row["probe"]}
            continue
        log.others.append((pos, row))
        resume = row.get("resume")
        if isinstance(resume, dict) and isinstance(resume.get("from_step"), int):
            for s in [s for s in log.by_step if s >= resume["from_step"]]:
                del log.by_step[s], log.step_pos[s]
    return log


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        row = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not valid UTF-8"
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg})"
    if not isinstance(row, dict):
        return None, f"expected a JSON object, got {type(row).__name__}"
    return row, ""


def seal_torn_tail(run_dir: str | Path) -> int:
    """Close an unfinished last line so the next append starts on a fresh line; a torn one (not JSON) is
    followed by a ``torn_line`` record so readers skip it. Returns the torn line's bytes (0: none)."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return 0
    with open(path, "rb") as f:
        if f.seek(0, os.SEEK_END) == 0:
            return 0
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return 0
    data = path.read_bytes()  # only after a kill: the whole file, to number the torn line
    last = data.rsplit(b"\n", 1)[-1]
    row, _ = _parse(last)
    with open(path, "ab") as f:
        if row is not None:  # a complete record that only lacks its newline
            f.write(b"\n")
            return 0
        seal = {"torn_line": {"bytes": len(last), "line": data.count(b"\n") + 1}}
        f.write(b"\n" + json.dumps(seal).encode() + b"\n")
    return len(last)


def append_record(run_dir: str | Path, record: dict[str, Any]) -> None:
    """Append one record as one line (after sealing a torn last line, so it never glues onto one)."""
    seal_torn_tail(run_dir)
    with open(Path(run_dir) / METRICS, "a") as f:
        f.write(json.dumps(record) + "\n")
