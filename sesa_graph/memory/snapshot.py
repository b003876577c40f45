"""Reading what a bank writes for people and notebooks: the live skills file, snapshots, and diffs.

Everything here reads plain files (``skills.jsonl``, ``snapshots/vNNNN.jsonl``), never Chroma, and never
takes the writer's lock, so it is safe while a run is writing the bank::

    import pandas as pd
    df = pd.read_json("runs/tiny-cpu/memory/snapshots/v0003.jsonl", lines=True)

Without ``journal.json`` the files equal Chroma. With it a writer stopped (or is) mid-way through a
commit or a counter update, and the files may be partly rewritten: :func:`committed_view` then rebuilds
the last finished state from the journal's ``before`` and says what is pending (``sesa bank show``,
``export``). A damaged file is a :class:`BankCorruptError` naming it and how to recover.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from sesa_graph.fsutil import JsonlError, read_jsonl
from sesa_graph.memory.bank_journal import describe_journal, load_journal
from sesa_graph.memory.bank_layout import (
    JOURNAL,
    LIVE,
    QUEUE,
    SNAPSHOTS,
    STATE,
    BankCorruptError,
    BankNotFoundError,
    load_state,
    snapshot_name,
    snapshot_versions,
)
from sesa_graph.memory.queue import FailureQueue, parse_queue
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


def _skills_fix(path: Path) -> str:
    if path.name == LIVE:
        versions = snapshot_versions(path.parent)
        last = (
            f"; meanwhile `sesa bank show {path.parent}@v{versions[-1]}` shows the last snapshot"
            if versions
            else ""
        )
        return f"the next writer to open the bank (e.g. `sesa train --resume`) rewrites it from Chroma{last}"
    return "snapshots are never rewritten: restore it from a copy of the bank"


def read_skills(path: str | Path) -> list[Skill]:
    """Skills of a JSONL file (a snapshot or ``skills.jsonl``, both written whole, so a torn last line is
    damage here, not an append in progress); BankCorruptError naming ``file:line`` and how to recover."""
    path = Path(path)
    try:
        rows = read_jsonl(path)
    except JsonlError as exc:
        raise BankCorruptError(f"{exc} -- the file is damaged; {_skills_fix(path)}") from None
    except UnicodeDecodeError as exc:
        raise BankCorruptError(f"{path} is damaged: not valid UTF-8 ({exc}); {_skills_fix(path)}") from None
    if rows.torn:
        raise BankCorruptError(
            f"{path}: its last line is cut short -- the file is damaged; {_skills_fix(path)}"
        )
    out = []
    for row, line in zip(rows, rows.line_numbers):
        try:
            out.append(Skill.model_validate(row))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "the skill"
            raise BankCorruptError(
                f"{path}:{line}: not a skill ({where}: {err['msg']}) -- the file is damaged; {_skills_fix(path)}"
            ) from None
    return out


def live_skills(bank: str | Path) -> list[Skill]:
    """The bank's current skills and counters, as of the last step boundary (the last finished state when
    a commit is pending, see :func:`committed_view`)."""
    return committed_view(bank).skills


def read_state(bank: str | Path) -> dict:
    """The bank's checked ``state.json`` (the last finished one when a commit is pending)."""
    return committed_view(bank).state


@dataclass
class BankView:
    """What the bank's files say, as of the last finished commit or counter update; ``pending``: the one
    that is not finished (None when there is none)."""

    path: Path
    state: dict
    skills: list[Skill]
    queue_len: int
    pending: str | None = None

    def warning(self) -> str | None:
        if self.pending is None:
            return None
        return (
            f"{self.path}: an unfinished {self.pending} is pending ({JOURNAL} is present); shown is the last "
            f"finished state (version {self.state['version']}); the next writer to open the bank "
            "(e.g. `sesa train --resume`) finishes it"
        )


def committed_view(bank: str | Path) -> BankView:
    """The bank as of its last finished change, read from its files only (see the module docstring)."""
    path = bank_dir(bank)
    state_file = path / STATE
    if not state_file.is_file():
        raise BankNotFoundError(
            f"{state_file} is missing (the bank's skills are there, its state is not); "
            "a snapshot still reads as BANK@vN"
        )
    state = load_state(state_file)
    entry = load_journal(path / JOURNAL, state["version"])
    skills = {s.id: s for s in read_skills(path / LIVE)}
    queue = _read_queue(path / QUEUE)
    pending = None
    if entry is not None:
        pending = describe_journal(entry)
        before = entry.get("before")
        if isinstance(before, dict):  # journals written before it existed: the files as they are
            state = before.get("state") or state
            for sid, old in (before.get("skills") or {}).items():
                if old is None:
                    skills.pop(sid, None)
                else:
                    skills[sid] = Skill.model_validate(old)
            if QUEUE in (before.get("files") or {}):
                old_queue = before["files"][QUEUE]
                queue = len(parse_queue(old_queue, path / QUEUE)[0]) if old_queue is not None else queue
        else:
            pending += " (its files may be partly rewritten)"
    ordered = sorted(skills.values(), key=lambda s: (not s.seed, s.created_step, s.id))
    return BankView(path=path, state=state, skills=ordered, queue_len=queue, pending=pending)


def _read_queue(file: Path) -> int:
    return len(FailureQueue.load(file, cap=10**9)) if file.is_file() else 0


def snapshot_version(ref: str | Path) -> int | None:
    """N for ``<bank>@vN`` (a bank as of snapshot N), None for a plain bank reference."""
    m = re.search(r"@v(\d+)$", str(ref))
    return int(m.group(1)) if m else None


def snapshot_skills(ref: str | Path) -> tuple[Path, list[Skill]]:
    """The snapshot file and skills of ``<bank>@vN``. Needs neither state.json nor skills.jsonl, so it is
    also the way out when those are damaged."""
    version = snapshot_version(ref)
    if version is None:
        raise ValueError(f"{ref!r} names no snapshot (expected BANK@vN)")
    file = bank_dir(ref) / SNAPSHOTS / snapshot_name(version)
    if not file.is_file():
        have = ", ".join(f"v{v}" for v in snapshot_versions(file.parent.parent)) or "none"
        raise BankNotFoundError(f"{ref}: there is no snapshot {file} (snapshots: {have})")
    return file, read_skills(file)


def pending_change(bank: str | Path) -> str | None:
    """What the bank's journal says is unfinished (None without a journal); damage is an error."""
    return None if (entry := load_journal(bank_dir(bank) / JOURNAL)) is None else describe_journal(entry)


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
