"""Reading what a bank writes for people and notebooks: the live skills file, snapshots, and diffs.

Everything here reads plain files (``skills.jsonl``, ``snapshots/vNNNN.jsonl``), never Chroma, so it is
safe while a run is writing the bank::

    import pandas as pd
    df = pd.read_json("runs/tiny-cpu/memory/snapshots/v0003.jsonl", lines=True)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from sesa_graph.fsutil import read_jsonl
from sesa_graph.memory.bank_layout import LIVE, SNAPSHOTS, STATE, BankNotFoundError, snapshot_name
from sesa_graph.memory.skill import Skill

BANK_SUBDIRS = ("bank", "memory")
"""Where a run directory keeps its bank: ``bank/`` (as `sesa train` writes it), or ``memory/`` (older runs)."""


def bank_dir(path: str | Path) -> Path:
    """The bank directory for ``path``: the bank itself, a run directory holding one (``bank/`` or
    ``memory/``), or ``<bank>@vN`` as eval records name a bank and its version.

    A directory with the bank's ``state.json`` wins; failing that, one with the plain files a reader needs
    (``snapshots/`` or ``skills.jsonl``, e.g. a bank copied without its state). BankNotFoundError if none."""
    path = Path(re.sub(r"@v\d+$", "", str(path)))
    cands = (path, *(path / d for d in BANK_SUBDIRS))
    for cand in cands:
        if (cand / STATE).is_file():
            return cand
    for cand in cands:
        if (cand / SNAPSHOTS).is_dir() or (cand / LIVE).is_file():
            return cand
    raise BankNotFoundError(f"no skill bank at {path} (expected {path / STATE} or {path / 'bank' / STATE})")


def read_skills(path: str | Path) -> list[Skill]:
    """Skills of a JSONL file (a snapshot or ``skills.jsonl``)."""
    return [Skill.model_validate(row) for row in read_jsonl(Path(path))]


def live_skills(bank: str | Path) -> list[Skill]:
    """The bank's current skills and counters, as of the last step boundary."""
    return read_skills(bank_dir(bank) / LIVE)


def read_state(bank: str | Path) -> dict:
    state = bank_dir(bank) / STATE
    if not state.is_file():
        raise BankNotFoundError(f"{state} is missing (the bank's skills are there, its state is not)")
    return json.loads(state.read_text())


def snapshot_paths(bank: str | Path) -> list[Path]:
    return sorted((bank_dir(bank) / SNAPSHOTS).glob("v[0-9]*.jsonl"))


def resolve_snapshot(ref: str | Path, bank: str | Path | None = None) -> Path:
    """A snapshot from a path, or from a version number ('3', 'v3') of ``bank``."""
    p = Path(ref)
    if p.is_file():
        return p
    text = str(ref).lstrip("v")
    if text.isdigit():
        if bank is None:
            raise FileNotFoundError(f"snapshot {ref!r}: give a file path, or a version with --bank DIR")
        p = bank_dir(bank) / SNAPSHOTS / snapshot_name(int(text))
        if p.is_file():
            return p
    raise FileNotFoundError(f"snapshot {ref!r} not found" + (f" (looked for {p})" if text.isdigit() else ""))


@dataclass
class SnapshotDiff:
    admitted: list[Skill] = field(default_factory=list)
    evicted: list[Skill] = field(default_factory=list)
    changed: list[tuple[Skill, Skill]] = field(default_factory=list)  # (before, after) with other counters


def diff_snapshots(a: list[Skill], b: list[Skill]) -> SnapshotDiff:
    """What changed from snapshot ``a`` to snapshot ``b``: skills admitted, evicted, and counter changes."""
    before = {s.id: s for s in a}
    after = {s.id: s for s in b}
    d = SnapshotDiff(
        admitted=[s for sid, s in after.items() if sid not in before],
        evicted=[s for sid, s in before.items() if sid not in after],
    )
    for sid, s in after.items():
        old = before.get(sid)
        if old is not None and (old.retrieved, old.helpful, old.hurt) != (s.retrieved, s.helpful, s.hurt):
            d.changed.append((old, s))
    return d
