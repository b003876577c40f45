"""What config a run recorded, so that ``--resume`` runs exactly that one.

``runs/NAME/config.yaml`` is what the run runs with; ``runs/NAME/config.recorded.json`` holds the settings the
run itself last wrote there and their sha256 (of the settings, not the bytes: comments and layout may change).
A ``config.yaml`` edited by hand afterwards is refused on ``--resume``, naming each changed key: the way to
change a setting of a run is ``--set KEY=VALUE`` with ``--resume``, which applies the settings that are safe
mid-run and refuses the others with the reason (``training.resume``); a hand edit would skip those rules.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sesa_graph.config_yaml import read_config_file
from sesa_graph.fsutil import write_json_atomic
from sesa_graph.reference_values import flatten
from tools.errors import UserError
from tools.terminal import shown

RECORD = "config.recorded.json"


def settings_hash(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def record_config(run_dir: Path) -> None:
    """Record the settings ``run_dir/config.yaml`` holds now (right after the run wrote it)."""
    data, _ = read_config_file(run_dir / "config.yaml")
    write_json_atomic(run_dir / RECORD, {"sha256": settings_hash(data), "config": data})


def check_recorded(run_dir: Path, error: type[UserError] = UserError) -> str | None:
    """None when ``config.yaml`` holds the settings the run recorded; a note for a run with no record (made
    before records were kept); ``error`` naming each changed key when the file was edited since."""
    path = run_dir / RECORD
    if not path.exists():
        return f"{run_dir / 'config.yaml'}: no recorded settings to check it against (an older run); taken as it is"
    try:
        rec = json.loads(path.read_text())
        recorded, digest = rec["config"], rec["sha256"]
        if not isinstance(recorded, dict) or settings_hash(recorded) != digest:
            raise ValueError("its settings do not match its sha256")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise error(
            f"{path} (the settings the run recorded) is damaged: {shown(exc, 200, one_line=True)}; restore it "
            f"from a backup, or delete it to resume with {run_dir / 'config.yaml'} as it is"
        ) from None
    data, _ = read_config_file(run_dir / "config.yaml")
    if settings_hash(data) == digest:
        return None
    was, now = flatten(recorded), flatten(data)
    lines = [
        f"  {k}: recorded {_v(was, k)}, the file has {_v(now, k)}"
        for k in sorted(set(was) | set(now))
        if was.get(k, _MISSING) != now.get(k, _MISSING)
    ]
    raise error(
        f"{run_dir / 'config.yaml'} was edited after the run recorded it ({path}):\n"
        + "\n".join(lines)
        + "\na resume runs the recorded settings: put the recorded values back, and give a change as "
        f"`sesa train --resume {run_dir} --set KEY=VALUE` (settings safe mid-run -- steps, timeouts, URLs, "
        "GPUs, logging -- are applied and recorded; the others are refused with the reason)"
    )


_MISSING = object()


def _v(flat: dict[str, Any], key: str) -> str:
    if key not in flat:
        return "(no such key)"
    return shown(json.dumps(flat[key]), 120, one_line=True)
