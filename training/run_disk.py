"""What a run keeps on disk, and pruning a finished run down to its results.

A finished default run keeps about 4 GiB: ``checkpoints/`` (per role the last checkpoint: fp32 weights and
the AdamW moments, 1.6 GiB for the 135M) so that ``sesa train --resume runs/NAME --steps N`` can extend it,
and ``policies/`` (the final weights, 0.5 GiB a role), which is what ``sesa eval`` and a new run load. Trial
runs add up fast (eighteen filled 57 GB), so ``sesa runs --prune NAME`` removes what only an extension
needs -- ``checkpoints/`` and the ``superseded/`` files earlier attempts set aside -- from a finished run and
records it in ``PRUNED.json``; a later ``--resume`` of it is refused by name instead of starting the
optimizer afresh.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from sesa_graph.fsutil import write_json_atomic
from tools.errors import UserError

PRUNED = "PRUNED.json"
ONLY_FOR_EXTENDING = ("checkpoints", "superseded")


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (links not followed, not counted)."""
    if path.is_file() and not path.is_symlink():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def footprint(run_dir: Path) -> dict[str, int]:
    """Bytes per top-level entry of ``run_dir`` ('other' collects the small ones), largest first."""
    parts: dict[str, int] = {}
    for entry in run_dir.iterdir():
        size = tree_bytes(entry)
        key = entry.name if size >= 2**26 or entry.name in ONLY_FOR_EXTENDING else "other"
        parts[key] = parts.get(key, 0) + size
    return dict(sorted(parts.items(), key=lambda kv: -kv[1]))


def describe(run_dir: Path) -> str:
    """'3.9 GiB: checkpoints 3.0, policies 0.9, other 0.0' for a report line."""
    parts = footprint(run_dir)
    shown = ", ".join(f"{k} {v / 2**30:.1f}" for k, v in parts.items() if v)
    return f"{sum(parts.values()) / 2**30:.1f} GiB ({shown})"


def pruned(run_dir: Path) -> dict | None:
    """The record of a prune of ``run_dir`` (None when it was never pruned)."""
    try:
        return json.loads((run_dir / PRUNED).read_text())
    except (OSError, ValueError):
        return None


def prune(run_dir: Path) -> int:
    """Remove ``checkpoints/`` and ``superseded/`` from the finished run ``run_dir``; the bytes freed. A run
    that is not finished is refused: a running, stopped or killed one needs its checkpoints to resume."""
    from training.run_life import status

    state = status(run_dir)
    if not state.startswith("finished"):
        raise UserError(
            f"--prune {run_dir.name}: the run is not finished ({state}); its checkpoints are what `sesa train "
            f"--resume {run_dir}` continues from. Resume it to the end first, or delete the directory"
        )
    freed, removed = 0, []
    for name in ONLY_FOR_EXTENDING:
        if (run_dir / name).exists():
            freed += tree_bytes(run_dir / name)
            shutil.rmtree(run_dir / name)
            removed.append(name)
    if removed:
        earlier = pruned(run_dir) or {}
        write_json_atomic(
            run_dir / PRUNED,
            {
                "at": time.strftime("%Y-%m-%d %H:%M:%S"),
                "removed": sorted(set(removed) | set(earlier.get("removed", []))),
                "freed_bytes": freed + int(earlier.get("freed_bytes", 0)),
            },
        )
    return freed


def refuse_if_pruned(run_dir: Path, error: type[Exception] = UserError) -> None:
    """An ``error`` naming the prune when ``run_dir``'s checkpoints were removed by :func:`prune`."""
    record = pruned(run_dir)
    if record is not None:
        raise error(
            f"--resume {run_dir}: the run was pruned at {record.get('at', '?')} (`sesa runs --prune`), so its "
            "checkpoints -- the weights and optimizer state a resume continues from -- are gone; its final "
            f"weights are in {run_dir / 'policies'}: start a new run from them (--set solver_policy.model=PATH)"
        )
