"""Outside text (corpus documents, model turns, skills, questions, ids, endpoint replies, file contents) made
safe to put on a terminal: every control character -- ESC and the C1 range that start terminal escape
sequences, other C0 bytes, DEL, and the bidirectional overrides that reorder what a reader sees -- is shown as
a visible escape such as ``\\x1b``, and a long field is cut with a note of how much was left out.

The one place that rule lives; every command that prints text it did not write goes through :func:`shown`.
It does not touch rich markup: print the result with ``markup=False`` (or ``rich.markup.escape``) too.
"""

from __future__ import annotations

import re

# C0 except tab and newline, DEL, C1, and the Unicode bidi controls (U+061C, U+200E/F, U+202A-E, U+2066-9).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

FIELD_CHARS = 2000
"""Default cap on one field shown in a terminal (a document, a skill, a question)."""
ID_CHARS = 200
"""Default cap on an identifier shown in a terminal (a document id, a run or eval name)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, limit: int | None = FIELD_CHARS, *, one_line: bool = False) -> str:
    """``text`` with its control characters made visible, cut to ``limit`` characters (None: no cut).
    ``one_line`` also escapes tabs and line breaks (for a table cell or a listing)."""
    s = text if isinstance(text, str) else str(text)
    cut = ""
    if limit is not None and len(s) > limit:
        cut = f"... [{len(s) - limit} more characters]"
        s = s[:limit]
    return (_UNSAFE_LINE if one_line else _UNSAFE).sub(_escape, s) + cut


def unsafe(text: str) -> bool:
    """Whether ``text`` holds a character :func:`shown` would escape (tabs and line breaks aside)."""
    return _UNSAFE.search(text) is not None


def data_line(obj: object) -> str:
    """``obj`` as one JSON line for stdout: non-ASCII kept readable, but when a string holds a control or
    bidi character the whole line is ASCII-escaped (the same value, ``\\u001b`` instead of the raw byte)."""
    import json

    line = json.dumps(obj, ensure_ascii=False)
    return json.dumps(obj) if unsafe(line) else line
