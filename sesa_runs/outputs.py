"""Where a command may write a file a user named (``-o``, ``--html``): never over an existing file without
``--force``, never onto a directory, and never inside a skill bank, a run or an eval directory, whose files
their own writers own (``sesa bank export -o BANK/state.json`` would leave a bank that no longer opens).
A write that fails (a read-only directory, a full disk) is a :class:`UserError` naming the file."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tools.errors import UserError


def owner_of(path: Path) -> tuple[str, Path] | None:
    """``(kind, directory)`` for the bank, run or eval directory holding ``path`` (itself or an ancestor)."""
    for d in (path, *path.parents):
        if (d / "state.json").is_file() and ((d / "skills.jsonl").is_file() or (d / "snapshots").is_dir()):
            return "skill bank", d
        if (d / "eval.json").is_file() or (d / "records.jsonl").is_file():
            return "eval", d
        if (d / "config.yaml").is_file() and any(
            (d / m).exists() for m in ("metrics.jsonl", "trajectories", "bank", "memory", "policies")
        ):
            return "run", d
    return None


def output_file(path: Path, flag: str, *, force: bool = False) -> Path:
    """``path`` when a command may write it (see the module); else a UserError naming ``flag`` and the fix."""
    p = Path(os.path.abspath(path))
    if p.is_dir():
        raise UserError(f"{flag} {path} is a directory; give a file name")
    if p.exists() and not p.is_file():  # replacing a device or FIFO with a file is never what was meant
        raise UserError(f"{flag} {path} is not a regular file (a device, FIFO or socket); give a file name")
    parent = next((d for d in p.parents if d.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UserError(f"{flag} {path}: {parent} is a file, not a directory")
    owner = owner_of(p.resolve().parent)
    if owner is not None:
        raise UserError(
            f"{flag} {path} is inside the {owner[0]} {owner[1]}, whose files only its own writer changes "
            "(even with --force); write somewhere else"
        )
    if p.exists() and not force:
        raise UserError(f"{flag} {path} already exists; pass --force to replace it, or choose another file")
    return p


@contextlib.contextmanager
def writing(path: Path | str, what: str = "output") -> Iterator[None]:
    """An OSError while writing ``path`` (read-only, full disk, no permission) as a UserError naming it."""
    try:
        yield
    except UserError:
        raise
    except OSError as exc:
        where = exc.filename or path
        raise UserError(f"cannot write the {what} {where}: {exc.strerror or exc}") from None
