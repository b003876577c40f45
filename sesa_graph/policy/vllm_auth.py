"""Runs inside a vLLM API server (``--middleware``): every route but ``/health`` requires
``Authorization: Bearer <token>``.

vLLM's own ``--api-key`` guards only the paths under ``/v1``, ``/v2``, ``/inference`` and ``/cohere``; the
dev-mode routes that replace the served weights (``/collective_rpc``, ``/pause``, ``/resume``,
``/reset_prefix_cache``) and the rest (``/tokenize``, ``/start_profile``, ...) stay open to anyone who can
reach the port. This guard sits in front of all of them. ``/health`` stays open because nothing there
changes state and start-up waits on it before the client has anything to prove.

The token comes from the environment (``SESA_VLLM_TOKEN``), not the command line: a process's arguments are
readable by every user of the machine, its environment only by its owner. Loaded by vLLM by import path, so
it imports nothing from ``sesa_graph`` (whose package ``__init__`` is light).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

TOKEN_ENV = "SESA_VLLM_TOKEN"
OPEN_PATHS = frozenset({"/health"})


def _digest(value: str) -> bytes:
    # equal-length digests, so the comparison takes the same time whatever the guess
    return hashlib.sha256(value.encode("utf-8")).digest()


class BearerTokenMiddleware:
    """Pure ASGI middleware; refuses to start without a token, so a server meant to be guarded never runs
    open."""

    def __init__(self, app: Any) -> None:
        token = os.environ.get(TOKEN_ENV, "")
        if not token:
            raise RuntimeError(
                f"{__name__}.BearerTokenMiddleware needs the token in ${TOKEN_ENV}; the server stays down"
            )
        self.app = app
        self._want = _digest(token)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                return scheme.lower() == "bearer" and hmac.compare_digest(_digest(token.strip()), self._want)
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):  # lifespan events carry no request
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "").removeprefix(scope.get("root_path", "")) or "/"
        if path in OPEN_PATHS or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: the handshake fails
            return
        body = b'{"error": "Unauthorized: send Authorization: Bearer <token>"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
