"""Read a user's JSONL file line by line, so every decoding or parsing failure names the file and line.

The file is read as bytes and each line decoded on its own: Python's text mode would report bad UTF-8
as a bare ``UnicodeDecodeError`` with a position in an internal buffer, useless to someone fixing the
file. A UTF-8 byte-order mark at the start is accepted (editors on Windows add one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tools.errors import UserError

_BOM = b"\xef\xbb\xbf"


def iter_jsonl(path: Path, error: type[UserError], what: str) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed value)`` for every non-blank line of ``path``; ``error(message)`` is raised
    for an unreadable file, bad UTF-8 or a line that is not JSON. ``what`` names the expected line (for
    the message), e.g. ``"a JSON object with 'id' and 'contents'"``."""
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed below; opening is the step whose OSError we name
    except OSError as e:
        raise error(f"{path}: cannot read the file: {e.strerror or e}") from None
    offset = 0
    with f:
        for lineno, raw in enumerate(f, start=1):
            start, offset = offset, offset + len(raw)
            if lineno == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
                start += len(_BOM)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise error(
                    f"{path}:{lineno}: not valid UTF-8 ({e.reason} at byte {start + e.start} of the file, "
                    f"column {e.start + 1} of the line); save the file as UTF-8"
                ) from None
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                raise error(
                    f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno}); want {what}"
                ) from None
            except (ValueError, RecursionError) as e:  # integers too long to convert, nesting too deep
                raise error(
                    f"{path}:{lineno}: unusable JSON ({type(e).__name__}: {e}); want {what}"
                ) from None
            yield lineno, value


def unpaired_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (a ``\\ud800``-style JSON escape): valid JSON, but it
    cannot be written back as UTF-8, so it would crash whatever hashes or stores the text later."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
