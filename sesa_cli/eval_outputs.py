"""Where ``sesa eval`` writes, checked before it starts and its write failures said plainly: ``--out-root``
must be a directory (or not exist yet) outside any skill bank or other eval, and a disk that refuses the
eval's files (read-only, full, no permission) is one ``error:`` line naming the file, not a traceback."""

from __future__ import annotations

import errno
from pathlib import Path

from sesa_runs.outputs import owner_of
from tools.errors import UserError

WRITE_ERRNOS = {
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.ENOSPC,
    errno.EDQUOT,
    errno.ENOTDIR,
    errno.EISDIR,
}
"""The errors a disk gives a writer that a user fixes (space, permissions, a file where a directory goes)."""


def check_out_root(out_root: Path) -> None:
    """A UserError when ``--out-root`` is a file, lies under a file, or lies inside a bank or an eval."""
    p = Path(out_root).absolute()
    for d in (p, *p.parents):
        if d.exists():
            if not d.is_dir():
                where = "is a file" if d == p else f"lies under the file {d}"
                raise UserError(f"--out-root {out_root} {where}; give a directory (evals/ by default)")
            break
    owner = owner_of(p)
    if owner is not None and owner[0] != "run":
        raise UserError(
            f"--out-root {out_root} is inside the {owner[0]} {owner[1]}, whose files only its own writer "
            "changes; give another directory (evals/ by default)"
        )


def write_error(exc: OSError, out_dir: Path) -> UserError:
    """The UserError for a write the disk refused in eval ``out_dir``."""
    where = exc.filename or out_dir
    return UserError(
        f"cannot write {where}: {exc.strerror or exc}; free space or fix the permissions of {out_dir} (or "
        "give another --out-root), then rerun the same command to resume"
    )
