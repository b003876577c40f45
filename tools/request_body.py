"""The JSON body of a request to one of the project's servers, read within bounds and refused by name.

Every server the project runs (the search server, ``sesa policy serve``'s in-process server, and the front
it puts before vLLM) reads its POST bodies through :class:`JsonBodyGuard`, an ASGI middleware: the body is
refused before any route sees it when it is too large (413: read in chunks, nothing kept past the cap),
not JSON by its content type (415), not valid JSON, nested deeper than any request needs, or holding
``NaN``/``Infinity`` (Python's JSON reader accepts them, and they broke requests further down: 500s, and an
error reply that itself could not be serialised). A route's own schema check runs in the same place, so a
refusal is always one JSON reply whose body names the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from tools.inputs import MAX_NESTING

MAX_BODY_BYTES = 8 * 2**20  # a 4k-token prompt as text is ~20 kB; 8 MiB leaves room for long chat histories
DRAIN_FACTOR = 8  # an oversized body is read (not kept) up to this many times the cap before the refusal
MAX_DEPTH = MAX_NESTING


class BadRequest(Exception):
    """A request a server refuses; ``param`` names the field (``None``: the body as a whole)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status

    def body(self) -> dict[str, Any]:
        """OpenAI's error body, which the official client reads (``param`` names the field)."""
        kind = {
            400: "BadRequestError",
            404: "NotFoundError",
            413: "RequestTooLargeError",
            415: "UnsupportedMediaTypeError",
        }.get(self.status, "InternalServerError")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.status}}


class _NonFinite:
    """What ``NaN``/``Infinity`` parse to, so the walk below can name the field that holds one."""

    def __init__(self, text: str) -> None:
        self.text = text


def json_object(raw: bytes, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """``raw`` as a JSON object: :class:`BadRequest` for anything else, naming the field where it can."""
    try:
        data = json.loads(raw, parse_constant=_NonFinite)
    except RecursionError:
        raise BadRequest(f"the request body nests deeper than {max_depth} levels") from None
    except ValueError as exc:  # UnicodeDecodeError and over-long integers included
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest(f"the request body must be a JSON object, not a {type(data).__name__}")
    _walk(data, max_depth)
    return data


def _walk(data: dict[str, Any], max_depth: int) -> None:
    # iterative: a recursive walk would itself fail on the bodies it is meant to refuse
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, _NonFinite):
            raise BadRequest(f"{where}: {value.text} is not a number JSON allows; send a finite value", where)
        if isinstance(value, (dict, list)):
            if depth >= max_depth:
                raise BadRequest(f"{where or 'body'}: nested deeper than {max_depth} levels", where or None)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                path = f"{where}[{key}]" if isinstance(value, list) else f"{where}.{key}" if where else key
                stack.append((item, path, depth + 1))


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _json_type(content_type: str | None) -> bool:
    # no header at all is taken as JSON (as FastAPI does); a declared other type is a client bug
    if content_type is None:
        return True
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


class JsonBodyGuard:
    """Pure ASGI middleware: POSTs to ``paths`` pass only with a bounded JSON object body that ``check(path,
    data)`` accepts (it raises :class:`BadRequest`); the route then reads the same bytes. ``render`` turns a
    refusal into the reply's JSON body."""

    def __init__(
        self,
        app: Any,
        paths: Collection[str],
        check: Callable[[str, dict[str, Any]], None] | None = None,
        render: Callable[[BadRequest], dict[str, Any]] = BadRequest.body,
        max_bytes: int = MAX_BODY_BYTES,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.app, self.paths, self.check, self.render = app, frozenset(paths), check, render
        self.max_bytes, self.max_depth = max_bytes, max_depth

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "").removeprefix(scope.get("root_path", "")) or "/"
        if scope.get("type") != "http" or scope.get("method") != "POST" or path not in self.paths:
            await self.app(scope, receive, send)
            return
        try:
            raw = await self._body(scope, receive)
            data = json_object(raw, self.max_depth)
            if self.check is not None:
                self.check(path, data)
        except BadRequest as exc:
            await _reply(send, exc.status, self.render(exc))
            return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)

    async def _body(self, scope: dict[str, Any], receive: Any) -> bytes:
        kind = _header(scope, b"content-type")
        if not _json_type(kind):
            raise BadRequest(
                f"content-type {kind!r}: the body must be JSON; send Content-Type: application/json",
                "content-type",
                415,
            )
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                break
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size <= self.max_bytes:
                chunks.append(chunk)
            elif size > DRAIN_FACTOR * self.max_bytes:
                break  # past this, the client gets the refusal and the connection closes under it
            if not msg.get("more_body", False):
                break
        if size > self.max_bytes:
            # read to the end (and dropped) first, so that a client still sending gets the answer, not a reset
            raise BadRequest(
                f"the request body is larger than {self.max_bytes} bytes; send a smaller one", None, 413
            )
        return b"".join(chunks)


async def _reply(send: Any, status: int, body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    if status == 413:
        headers.append(
            (b"connection", b"close")
        )  # the unread rest of the body must not be taken as a request
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})
