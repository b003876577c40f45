"""One owner per directory: an OS file lock held by the process that writes a skill bank, a run or an eval.

Two writers of one directory lose data (a bank's counters rewritten from two copies, a live run's trainers
killed as "left over" by a second ``--resume``, an eval's rollouts done twice). So the writer takes an
exclusive ``flock`` on a lock file inside the directory before it writes anything, holds it for its whole
life and writes who it is (pid, kernel start time, command line, time) into the file, for the error the next
writer gets.

``flock`` rather than a pid file: the kernel drops the lock when the holder dies, however it dies, so a stale
record never blocks anyone -- the next owner takes the lock and overwrites the record. ``flock`` locks belong
to an open file, so a second open in the same process conflicts too, and they belong to the inode, so a
symlinked path to the same directory meets the same lock. The descriptor is not inherited by child processes
(Python opens files close-on-exec): a run's trainers and servers never keep its lock alive. The lock is local
to one machine; directories on network file systems without ``flock`` are not protected by it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

from tools.errors import UserError
from tools.terminal import shown

_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


class OwnerLockedError(UserError, RuntimeError):
    """Another process owns the directory; the message names it and the holder."""


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot, /proc/PID/stat field 22), None if gone:
    with the pid it names one process, never a later one that reused the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_cmdline(pid: int) -> str | None:
    """The command line of ``pid`` (arguments joined by spaces), None if it is gone or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def is_process(pid: int, start: str | None) -> bool:
    """Whether ``pid`` is still the process that had kernel start time ``start`` (not a reused pid)."""
    return start is not None and process_start_time(pid) == start


def describe_holder(lock_file: Path) -> str:
    """'pid 1234: sesa train ... since 2024-05-01 12:00:00' from a lock file's record (best effort: a record
    being rewritten or damaged reads as unknown -- the lock, not the record, is the truth)."""
    try:
        rec = json.loads(lock_file.read_text() or "{}")
        pid, cmd, since = int(rec["pid"]), str(rec["cmd"]), float(rec["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return "a process whose record is not readable (see `fuser` or `lsof` on the lock file)"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
    return f"pid {pid}: {shown(cmd, 300, one_line=True)} since {stamp}"


class OwnerLock:
    """An acquired owner lock on ``lock_file``; :meth:`release` it (or use it as a context manager), or let
    the process end.

    ``busy(holder)`` gives the message of the error a second owner gets (``holder`` from
    :func:`describe_holder`); ``error`` is its class, also used when the lock file cannot be made (a
    read-only directory)."""

    def __init__(
        self,
        lock_file: Path,
        busy: Callable[[str], str],
        error: type[UserError] = OwnerLockedError,
    ) -> None:
        self.file = Path(lock_file)
        self._fd: int | None = _acquire(self.file, busy, error)
        record = {
            "pid": os.getpid(),
            "start": process_start_time(os.getpid()),
            "cmd": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "since": time.time(),
        }
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(record) + "\n").encode(), 0)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self, remove: bool = False) -> None:
        """Clear the record (``remove``: delete the file, for a directory about to be removed) and drop the
        lock; idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if remove:
                self.file.unlink(missing_ok=True)  # still held: whoever opens the name next gets a new inode
            else:
                os.ftruncate(fd, 0)  # while still holding it: a later holder's record is never wiped
        finally:
            os.close(fd)  # closing the only descriptor drops the flock

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _acquire(file: Path, busy: Callable[[str], str], error: type[UserError]) -> int:
    """An open descriptor of ``file`` holding its exclusive flock. A file unlinked by its previous owner
    between our open and our lock is opened again, so two owners never hold locks on two inodes."""
    for _ in range(5):
        try:
            fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            hint = " -- the directory must be writable by this user" if exc.errno in _NOT_WRITABLE else ""
            raise error(f"cannot take the owner lock {file}: {exc.strerror or exc}{hint}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise error(busy(describe_holder(file))) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(file).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
    raise error(f"cannot take the owner lock {file}: it keeps being removed by another process")
