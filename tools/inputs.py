"""Files a user points a command at, checked before they are read: a path that is missing, a directory, or
not a regular file (a FIFO that would block forever, a device that never ends, a socket) is a
:class:`UserError` naming it; a file past a size cap is refused instead of read into memory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tools.errors import UserError

MAX_NESTING = 32
"""Deepest nesting accepted in structured input from outside (config YAML, request bodies): no setting or
request field nests deeper than a few levels, and deep nesting only costs the parser."""


def regular_file(path: Path | str, what: str = "file") -> Path:
    """``path`` when it names a regular file (symlinks followed); else a UserError naming ``what`` and it."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise UserError(f"{what} {p} does not exist") from None
    except OSError as exc:
        raise UserError(f"{what} {p}: cannot read it: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{what} {p} is a directory; give a file")
    if not stat.S_ISREG(mode):
        raise UserError(f"{what} {p} is not a regular file (a FIFO, device or socket); give a file")
    return p


def read_bytes_bounded(path: Path | str, what: str = "file", max_bytes: int = 64 * 2**20) -> bytes:
    """The bytes of regular file ``path``, refused (UserError) past ``max_bytes``."""
    p = regular_file(path, what)
    try:
        with p.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise UserError(f"{what} {p}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise UserError(f"{what} {p} is larger than {max_bytes / 2**20:g} MiB; refusing to read it")
    return data
