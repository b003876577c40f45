"""Where a skill bank keeps what: its directory layout, its errors, and how a skill is stored in Chroma.

Layout of a bank directory (``runs/<name>/memory/`` by default)::

    state.json            version, embedder, counts, cumulative statistics (written last on create)
    chroma/               Chroma PersistentClient data (absent in server mode: chroma_host is set)
    queue.json            the pending-failure queue (sesa_graph.memory.queue)
    skills.jsonl          the current skills with counters, rewritten at every step boundary, for readers
                          (``sesa bank show``, notebooks) that must not open Chroma next to the writer
    snapshots/vNNNN.jsonl the bank after each consolidation (v0000: at creation), one skill per line
    snapshots/vNNNN.report.json  what that consolidation did
    journal.json          only while a commit is being applied (see :mod:`sesa_graph.memory.bank_journal`)

Chroma holds the skills (metadata ``skill`` = the record's static fields as JSON, plus the integer
counters ``retrieved``, ``helpful``, ``hurt`` so a step's credit is one ``update`` call) and, in a
second collection ``<name>_tombstones``, the embeddings of evicted skills, which keep blocking
near-duplicates from re-admission for ``tombstone_ttl_steps``.

Everything here is plain data: readers of the files (:mod:`sesa_graph.memory.snapshot`, ``sesa bank``)
import it without the bank itself.
"""

from __future__ import annotations

import json
from typing import Any

from sesa_graph.memory.skill import Skill
from tools.errors import UserError

STATE_FORMAT = 1
STATE, QUEUE, LIVE, JOURNAL, SNAPSHOTS, CHROMA = (
    "state.json",
    "queue.json",
    "skills.jsonl",
    "journal.json",
    "snapshots",
    "chroma",
)
_COUNTERS = ("retrieved", "helpful", "hurt")


class BankError(UserError, RuntimeError):
    """A skill bank that cannot be used as asked; the message names the path."""


class BankNotFoundError(BankError):
    """There is no bank at the path (open) -- it is never silently created."""


class BankExistsError(BankError):
    """A bank (or other files) already exist at the path (create)."""


class BankCorruptError(BankError):
    """The bank directory is damaged or incomplete."""


def _static_json(skill: Skill) -> str:
    return skill.model_dump_json(exclude=set(_COUNTERS))


def _metadata(skill: Skill) -> dict[str, Any]:
    return {
        "skill": _static_json(skill),
        "retrieved": skill.retrieved,
        "helpful": skill.helpful,
        "hurt": skill.hurt,
        "seed": skill.seed,
        "category": skill.category,
        "created_step": skill.created_step,
    }


def _skill_from_metadata(meta: dict[str, Any]) -> Skill:
    return Skill.model_validate({**json.loads(meta["skill"]), **{c: int(meta[c]) for c in _COUNTERS}})


def snapshot_name(version: int) -> str:
    return f"v{version:04d}.jsonl"
