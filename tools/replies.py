"""Replies from HTTP endpoints (policy, judge, distiller and search servers) read as untrusted bytes.

A body is read up to a byte cap (a server that streams forever or sends a gigabyte fails at the cap, not when
memory runs out), parsed as JSON (nesting too deep to parse is refused; the non-standard ``NaN`` and
``Infinity`` literals are read as floats so that the check of the field holding one names it), and each field
is checked for the type and range the API promises before it becomes data. What is wrong is a :class:`ReplyError` naming the field; the client adds the URL and raises
its own :class:`~tools.errors.ServiceError`. A 4xx answer is a :class:`RefusedError` carrying the server's
own message; a 5xx or 429 is a :class:`RetriableStatus`, which the clients' retry loops retry.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tools.terminal import shown

SNIPPET_CHARS = 160
"""How much of a bad body an error quotes (control characters made visible)."""


class ReplyError(ValueError):
    """A reply that is not what the endpoint's API promises; the message names the field."""


class RefusedError(ReplyError):
    """An HTTP 4xx answer: the request was refused, and retrying it cannot help."""


class RetriableStatus(Exception):
    """An HTTP 5xx or 429 answer: the server may recover, so the caller's retry loop tries again."""


def snippet(body: bytes | str, limit: int = SNIPPET_CHARS) -> str:
    """The start of ``body`` as an error may quote it: one line, control characters visible, cut."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return shown(text.strip(), limit, one_line=True)


def parse_json(body: bytes) -> Any:
    """``body`` as JSON; a :class:`ReplyError` saying what came instead (empty, HTML, cut short ...)."""
    if not body.strip():
        return _fail("an empty body where JSON was expected")
    try:
        return json.loads(body)
    except RecursionError:
        return _fail("JSON nested too deeply to parse")
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        what = "an HTML page" if body.lstrip()[:1] == b"<" else "a body that is not JSON"
        reason = getattr(exc, "msg", type(exc).__name__)
        return _fail(f"{what} ({reason}) where JSON was expected: {snippet(body)!r}")


def _fail(message: str) -> Any:
    raise ReplyError(message)


def check_status(status: int, body: bytes) -> None:
    """Raise for an HTTP error ``status``: :class:`RetriableStatus` (5xx, 429) or :class:`RefusedError`
    (other 4xx), with the server's message."""
    if status < 400:
        return
    message = f"HTTP {status}: {server_message(body) or '(no message)'}"
    if status >= 500 or status == 429:
        raise RetriableStatus(message)
    raise RefusedError(message)


def server_message(body: bytes) -> str:
    """The message an error body carries: OpenAI's ``error.message``, FastAPI's ``detail``, or its text."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return snippet(body, 300)
    if isinstance(data, dict):
        for key in ("error", "detail", "message"):
            value = data.get(key)
            if isinstance(value, dict):
                value = value.get("message", value)
            if value:
                return snippet(value if isinstance(value, str) else json.dumps(value), 300)
    return snippet(json.dumps(data), 300)


def read_capped(chunks: Any, max_bytes: int) -> bytes:
    """The bytes of an iterable of chunks (``httpx.Response.iter_bytes()``), refused past ``max_bytes``."""
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > max_bytes:
            raise ReplyError(f"a body over {max_bytes} bytes (the cap for this reply); refused unread")
    return bytes(out)


async def aread_capped(chunks: Any, max_bytes: int) -> bytes:
    """:func:`read_capped` for an async iterable (``httpx.Response.aiter_bytes()``)."""
    out = bytearray()
    async for chunk in chunks:
        out += chunk
        if len(out) > max_bytes:
            raise ReplyError(f"a body over {max_bytes} bytes (the cap for this reply); refused unread")
    return bytes(out)


def field(obj: Any, key: str, kind: type | tuple[type, ...], where: str, *, optional: bool = False) -> Any:
    """``obj[key]`` when it is a ``kind``; a :class:`ReplyError` naming ``where.key`` otherwise."""
    if not isinstance(obj, dict):
        raise ReplyError(f"{where} is {_kind(obj)}, not an object")
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise ReplyError(f"{where}.{key} is missing")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _tuple(kind):
        names = " or ".join(_NAMES.get(t, t.__name__) for t in _tuple(kind))
        raise ReplyError(f"{where}.{key} is {_kind(value)}, not {names}")
    return value


def finite(value: Any, where: str) -> float:
    """``value`` as a float when it is a finite JSON number (not a string, bool or null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReplyError(f"{where} is {_kind(value)}, not a number")
    if not math.isfinite(value):
        raise ReplyError(f"{where} is {value}, not a finite number")
    return float(value)


_NAMES = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "an object"}


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {snippet(value, 40)!r}"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return {dict: "an object", list: "a list"}.get(type(value), type(value).__name__)
