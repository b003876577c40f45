"""The one-writer lock of a skill bank: an OS file lock on ``writer.lock`` in the bank directory.

Two writers of one bank lose data: each keeps its own copy of the counters and rewrites ``skills.jsonl``
and ``state.json`` from it, so the second silently drops the first's updates while Chroma keeps both.
So a writer (:meth:`SkillBank.create`, :meth:`SkillBank.open` without ``read_only``) holds an exclusive
``flock`` for its whole life and writes who it is (pid, command line, start time) into the lock file for
the error the next writer gets.

``flock`` rather than a pid file: the kernel drops the lock when the holder's process dies, however it
dies, so a stale holder record never blocks anyone -- the next writer takes the lock and overwrites the
record. ``flock`` locks belong to an open file, so a second open in the same process conflicts too.
Readers (``sesa bank show/diff/export``, snapshot and notebook readers, read-only opens) never touch the
lock. The lock is local to one machine: banks on network file systems that do not support ``flock``, or
a Chroma server shared by banks in different directories, are not protected by it.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

from sesa_graph.memory.bank_layout import LOCK, BankError


class BankLockedError(BankError):
    """Another writer holds the bank; the message names the bank and the holder."""


def describe_holder(lock_file: Path) -> str:
    """'pid 1234: sesa train ... since 2024-05-01 12:00:00' from a lock file's record (best effort: a
    record being rewritten or damaged reads as unknown -- the lock, not the record, is the truth)."""
    try:
        rec = json.loads(lock_file.read_text() or "{}")
        pid, cmd, since = rec["pid"], rec["cmd"], float(rec["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return "a process whose record is not readable (see `fuser` or `lsof` on the lock file)"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
    return f"pid {pid}: {cmd} since {stamp}"


class BankLock:
    """An acquired writer lock (see the module docstring); :meth:`release` it, or let the process end."""

    def __init__(self, bank: Path) -> None:
        self.bank = Path(bank)
        self.file = self.bank / LOCK
        fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BankLockedError(
                f"skill bank {self.bank} is already open for writing (held by {describe_holder(self.file)}); "
                "a bank has one writer at a time. Wait for that process to finish or stop it, then retry; "
                "`sesa bank show/diff/export` can read the bank meanwhile"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        record = {
            "pid": os.getpid(),
            "cmd": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "since": time.time(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Clear the record and drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # while still holding it: a later holder's record is never wiped
        finally:
            os.close(fd)  # closing the only descriptor drops the flock
