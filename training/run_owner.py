"""Who owns a run directory, and where it lives.

A run has one owner: the ``sesa train`` (or ``sesa train --resume``) that writes it holds the owner lock
(:mod:`sesa_graph.owner_lock`) on ``runs/NAME/owner.lock`` from before its first write until it exits. A second
one is refused naming the holder before it writes a byte or signals a process, whatever path it came by
(paths are resolved first; the lock belongs to the directory's inode anyway). Stale-process cleanup on
resume happens only under the lock, so only processes of a dead owner are ever stopped.

Run directories are absolute from start-up on: the trainers, servers and records all get the same path,
whatever the working directory of ``sesa train`` or of the processes it starts.
"""

from __future__ import annotations

import time
from pathlib import Path

from sesa_graph.owner_lock import OwnerLock, OwnerLockedError
from tools.errors import UserError

LOCK = "owner.lock"


class RunInUseError(OwnerLockedError):
    """Another process owns the run directory; the message names the run and the holder."""


def lock_run(run_dir: Path) -> OwnerLock:
    """Take ``run_dir``'s owner lock (the directory must exist) or raise :class:`RunInUseError`."""

    def busy(holder: str) -> str:
        return (
            f"run {run_dir} is in use by {holder}; a run has one owner at a time and nothing was changed. "
            f"Wait for it to finish or stop it (Ctrl-C in its terminal, or kill its pid), then "
            f"`sesa train --resume {run_dir}`"
        )

    return OwnerLock(run_dir / LOCK, busy, RunInUseError)


def runs_root(runs_dir: Path) -> Path:
    """``--runs-dir`` made absolute and present; one that is a file or cannot be made is a UserError."""
    try:
        path = Path(runs_dir).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise UserError(f"--runs-dir {runs_dir}: {exc}; give a directory for the runs") from None
    if path.exists() and not path.is_dir():
        raise UserError(f"--runs-dir {path} is a file, not a directory; give a directory for the runs")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"--runs-dir {path}: cannot create it ({exc.strerror or exc}); give a writable directory"
        ) from None
    return path


def new_run_dir(runs_dir: Path, name: str) -> tuple[Path, OwnerLock]:
    """An empty run directory for ``name`` under ``runs_dir``, owned by this process: ``runs/NAME``, or
    ``runs/NAME-<time>`` when that one is taken (holds a run, or another process is starting one there)."""
    root = runs_root(runs_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for candidate in [name, f"{name}-{stamp}", *(f"{name}-{stamp}-{i}" for i in range(2, 20))]:
        run_dir = root / candidate
        if run_dir.exists() and not run_dir.is_dir():
            continue
        try:
            run_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"--runs-dir {root}: cannot create the run directory {run_dir} ({exc.strerror or exc}); "
                "give a writable --runs-dir"
            ) from None
        try:
            lock = lock_run(run_dir)
        except RunInUseError:
            continue
        if any(p.name != LOCK for p in run_dir.iterdir()):
            lock.release()
            continue
        return run_dir, lock
    raise UserError(f"--name {name}: every run directory tried under {root} is taken; give another --name")
