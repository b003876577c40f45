"""The one-writer lock of a skill bank: the owner lock (:mod:`sesa_graph.owner_lock`) on ``writer.lock`` in the
bank directory.

Two writers of one bank lose data: each keeps its own copy of the counters and rewrites ``skills.jsonl``
and ``state.json`` from it, so the second silently drops the first's updates while Chroma keeps both.
So a writer (:meth:`SkillBank.create`, :meth:`SkillBank.open` without ``read_only``) holds the lock for its
whole life. Readers (``sesa bank show/diff/export``, snapshot and notebook readers, read-only opens) never
touch the lock. A Chroma server shared by banks in different directories is not protected by it.
"""

from __future__ import annotations

from pathlib import Path

from sesa_graph.memory.bank_layout import LOCK, BankError
from sesa_graph.owner_lock import OwnerLock, OwnerLockedError, describe_holder

__all__ = ["BankLock", "BankLockedError", "describe_holder"]


class BankLockedError(BankError, OwnerLockedError):
    """Another writer holds the bank; the message names the bank and the holder."""


class BankLock(OwnerLock):
    """An acquired writer lock (see the module docstring); :meth:`release` it, or let the process end."""

    def __init__(self, bank: Path) -> None:
        self.bank = Path(bank)

        def busy(holder: str) -> str:
            return (
                f"skill bank {self.bank} is already open for writing (held by {holder}); a bank has one "
                "writer at a time. Wait for that process to finish or stop it, then retry; "
                "`sesa bank show/diff/export` can read the bank meanwhile"
            )

        super().__init__(self.bank / LOCK, busy, BankLockedError)
