"""Where a skill bank keeps what: its directory layout, its errors, and how a skill is stored in Chroma.

Layout of a bank directory (``runs/<name>/memory/`` by default)::

    state.json            version, embedder, counts, cumulative statistics (written last on create)
    chroma/               Chroma PersistentClient data (absent in server mode: chroma_host is set)
    queue.json            the pending-failure queue (sesa_graph.memory.queue)
    skills.jsonl          the current skills with counters, rewritten at every step boundary, for readers
                          (``sesa bank show``, notebooks) that must not open Chroma next to the writer
    snapshots/vNNNN.jsonl the bank after each consolidation (v0000: at creation), one skill per line
    snapshots/vNNNN.report.json  what that consolidation did
    journal.json          only while a commit or a counter update is being applied
                          (see :mod:`sesa_graph.memory.bank_journal`)
    writer.lock           the one writer's OS lock and who holds it (see :mod:`sesa_graph.memory.bank_lock`)

Chroma holds the skills (metadata ``skill`` = the record's static fields as JSON, plus the integer
counters ``retrieved``, ``helpful``, ``hurt`` so a step's credit is one ``update`` call) and, in a
second collection ``<name>_tombstones``, the embeddings of evicted skills, which keep blocking
near-duplicates from re-admission for ``tombstone_ttl_steps``.

Everything here is plain data: readers of the files (:mod:`sesa_graph.memory.snapshot`, ``sesa bank``)
import it without the bank itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sesa_graph.memory.skill import Skill
from tools.errors import UserError

STATE_FORMAT = 1
STATE, QUEUE, LIVE, JOURNAL, SNAPSHOTS, CHROMA, LOCK = (
    "state.json",
    "queue.json",
    "skills.jsonl",
    "journal.json",
    "snapshots",
    "chroma",
    "writer.lock",
)
COUNTERS = ("retrieved", "helpful", "hurt")


class BankError(UserError, RuntimeError):
    """A skill bank that cannot be used as asked; the message names the path."""


class BankNotFoundError(BankError):
    """There is no bank at the path (open) -- it is never silently created."""


class BankExistsError(BankError):
    """A bank (or other files) already exist at the path (create)."""


class BankCorruptError(BankError):
    """The bank directory is damaged or incomplete."""


def _static_json(skill: Skill) -> str:
    return skill.model_dump_json(exclude=set(COUNTERS))


def skill_metadata(skill: Skill) -> dict[str, Any]:
    return {
        "skill": _static_json(skill),
        "retrieved": skill.retrieved,
        "helpful": skill.helpful,
        "hurt": skill.hurt,
        "seed": skill.seed,
        "category": skill.category,
        "created_step": skill.created_step,
    }


def skill_from_metadata(meta: dict[str, Any]) -> Skill:
    return Skill.model_validate({**json.loads(meta["skill"]), **{c: int(meta[c]) for c in COUNTERS}})


def snapshot_name(version: int) -> str:
    return f"v{version:04d}.jsonl"


def snapshot_versions(bank: Path) -> list[int]:
    return sorted(int(p.name[1:5]) for p in (bank / SNAPSHOTS).glob("v[0-9][0-9][0-9][0-9].jsonl"))


def restore_hint(bank: Path) -> str:
    """How to get going again when a bank file the writer cannot rebuild is damaged."""
    versions = snapshot_versions(bank)
    start = (
        f"or start a new bank from its last snapshot: `sesa bank export {bank}@v{versions[-1]} -o skills.yaml` "
        "and list skills.yaml in memory.priming_files"
        if versions
        else "or start a new bank"
    )
    return f"restore it from a copy of the bank, {start}"


def check_state(obj: Any, file: Path) -> dict:
    """``obj`` (parsed ``state.json``) if it is a state this code can read, else BankCorruptError naming the
    file, what is wrong and how to recover."""
    problem = None
    if not isinstance(obj, dict):
        problem = f"expected a JSON object, got {type(obj).__name__}"
    elif obj.get("format") != STATE_FORMAT:
        problem = f"format {obj.get('format')!r}, expected {STATE_FORMAT}"
    else:
        missing = [k for k in ("version", "collection", "embedder", "n_skills") if k not in obj]
        if missing:
            problem = f"keys {missing} are missing"
        elif not all(
            isinstance(obj[k], int) and not isinstance(obj[k], bool) for k in ("version", "n_skills")
        ):
            problem = "version and n_skills must be integers"
    if problem:
        raise BankCorruptError(f"{file} is damaged: {problem}; {restore_hint(file.parent)}")
    return obj


def load_state(file: Path) -> dict:
    """Read and check ``state.json`` (see :func:`check_state`)."""
    try:
        obj = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BankCorruptError(
            f"{file} is damaged: not valid JSON ({exc}); {restore_hint(file.parent)}"
        ) from None
    return check_state(obj, file)
