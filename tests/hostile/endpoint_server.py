"""A real HTTP server on 127.0.0.1 that answers like a broken or hostile model or retrieval endpoint.

The first path segment picks the reply: ``http://127.0.0.1:PORT/<mode>/v1`` is an OpenAI-compatible base URL
whose ``/completions`` and ``/chat/completions`` answer as ``<mode>`` says (``GET .../models`` answers like a
healthy server, so start-up probes pass, except in modes ``huge`` and ``get-hang``), and ``http://127.0.0.1:PORT/<mode>`` a retrieval server whose
``/retrieve`` does. A mode may carry an argument after ``~`` (``id~49152``: that token id). Each reply is
built from the request, so "50 times the tokens asked" means just that.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

GOOD_ID = 28  # a plain token of the embedded SmolLM2 vocabulary
HANG_S = 6.0  # how long a hung reply holds the connection (past every row's client timeout)


def choice(req: dict, **over: Any) -> dict:
    """A valid completions choice for ``req`` (two tokens, or fewer when fewer were asked), then ``over``."""
    n = min(2, int(req.get("max_tokens") or 2))
    base = {
        "index": 0,
        "text": "ok" * n,
        "token_ids": [GOOD_ID] * n,
        "logprobs": {"token_logprobs": [-0.5] * n},
        "finish_reason": "stop",
    }
    return {**base, **over}


def body(*choices: dict) -> bytes:
    return json.dumps({"id": "cmpl-1", "object": "text_completion", "choices": list(choices)}).encode()


def chat(content: Any, **over: Any) -> bytes:
    msg = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop", **over}
    return json.dumps({"choices": [msg]}).encode()


def _completion(req: dict, arg: str) -> bytes:
    return body(choice(req))


def _raw_lp(literal: str) -> Callable[[dict, str], bytes]:
    def make(req: dict, arg: str) -> bytes:
        good = body(choice(req, logprobs={"token_logprobs": "@"}))
        return good.replace(b'"@"', f"[{literal}, -0.5]".encode())

    return make


def _many(req: dict, arg: str) -> bytes:
    n = 50 * int(req.get("max_tokens") or 1)
    return body(choice(req, token_ids=[GOOD_ID] * n, logprobs={"token_logprobs": [-0.1] * n}, text="x" * n))


# mode -> (request, argument) -> (status, body, content type); a body of None means the handler streams
SIMPLE: dict[str, Callable[[dict, str], tuple[int, bytes, str]]] = {}


def _json(
    fn: Callable[[dict, str], bytes], status: int = 200
) -> Callable[[dict, str], tuple[int, bytes, str]]:
    return lambda req, arg: (status, fn(req, arg), "application/json")


SIMPLE.update(
    {
        "ok": _json(_completion),
        "id": _json(lambda r, a: body(choice(r, token_ids=[int(a)], logprobs={"token_logprobs": [-0.5]}))),
        "id-str": _json(lambda r, a: body(choice(r, token_ids=["28"], logprobs={"token_logprobs": [-0.5]}))),
        "id-float": _json(
            lambda r, a: body(choice(r, token_ids=[28.5], logprobs={"token_logprobs": [-0.5]}))
        ),
        "nan": _json(_raw_lp("NaN")),
        "inf": _json(_raw_lp("-Infinity")),
        "nan-str": _json(_raw_lp('"NaN"')),
        "lp-null": _json(_raw_lp("null")),
        "lp-positive": _json(_raw_lp("3.5")),
        "many": _json(_many),
        "more-lps": _json(lambda r, a: body(choice(r, logprobs={"token_logprobs": [-0.1] * 5}))),
        "fewer-lps": _json(lambda r, a: body(choice(r, logprobs={"token_logprobs": []}))),
        "lps-not-list": _json(lambda r, a: body(choice(r, logprobs={"token_logprobs": "-0.5"}))),
        "no-choices": _json(lambda r, a: json.dumps({"id": "x", "object": "text_completion"}).encode()),
        "choices-dict": _json(lambda r, a: json.dumps({"choices": {"0": choice(r)}}).encode()),
        "choices-empty": _json(lambda r, a: body()),
        "two-choices": _json(lambda r, a: body(choice(r), choice(r))),
        "choice-str": _json(lambda r, a: json.dumps({"choices": ["ok"]}).encode()),
        "text-int": _json(lambda r, a: body(choice(r, text=5))),
        "finish-junk": _json(lambda r, a: body(choice(r, finish_reason="\x1b]0;pwned\x07junk"))),
        "ids-dict": _json(lambda r, a: body(choice(r, token_ids={"0": 28}))),
        "top-list": _json(lambda r, a: b"[1, 2, 3]"),
        "not-json": lambda r, a: (200, b"Service temporarily ready, please wait", "text/plain"),
        "html": lambda r, a: (200, b"<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1>", "text/html"),
        "empty": lambda r, a: (200, b"", "application/json"),
        "truncated": lambda r, a: (200, body(choice(r))[:40], "application/json"),
        "nested": lambda r, a: (200, b"[" * 100_000 + b"]" * 100_000, "application/json"),
        "bad-utf8": lambda r, a: (200, b'{"choices": "\xff\xfe"}', "application/json"),
        "400": lambda r, a: (
            400,
            json.dumps(
                {"error": {"message": "This model's maximum context length is 2048 tokens", "code": 400}}
            ).encode(),
            "application/json",
        ),
        "404-html": lambda r, a: (404, b"<html><title>404 Not Found</title></html>", "text/html"),
        "500": lambda r, a: (
            500,
            b'{"detail": "CUDA error: device-side assert triggered"}',
            "application/json",
        ),
        "429": lambda r, a: (429, b'{"error": {"message": "rate limited"}}', "application/json"),
        # chat replies (the judge's and the distiller's endpoints)
        "chat": lambda r, a: (200, chat(a), "application/json"),
        "chat-int": _json(lambda r, a: chat(42)),
        "chat-list": _json(lambda r, a: chat([{"type": "text", "text": "Correct"}])),
        "chat-no-message": _json(
            lambda r, a: json.dumps({"choices": [{"index": 0, "text": "Correct"}]}).encode()
        ),
        "chat-no-choices": _json(lambda r, a: json.dumps({"object": "chat.completion"}).encode()),
    }
)

# retrieval answers (POST /<mode>/retrieve): one list of hits per query
HIT = {"document": {"id": "d1", "contents": '"Paris"\nParis is the capital of France.'}, "score": 1.5}


def _hits(req: dict, hit: Any, per_query: int = 1, lists: int | None = None) -> bytes:
    n = len(req.get("queries") or []) if lists is None else lists
    return json.dumps({"result": [[hit] * per_query for _ in range(n)]}).encode()


SIMPLE.update(
    {
        "s-ok": _json(lambda r, a: _hits(r, HIT)),
        "s-result-dict": _json(lambda r, a: json.dumps({"result": {"q": [HIT]}}).encode()),
        "s-no-result": _json(lambda r, a: json.dumps({"results": [[HIT]]}).encode()),
        "s-lists": _json(lambda r, a: _hits(r, HIT, lists=int(a))),
        "s-hits-str": _json(lambda r, a: json.dumps({"result": ["Paris"]}).encode()),
        "s-text-int": _json(lambda r, a: _hits(r, {"document": {"id": "d1", "contents": 12345}})),
        "s-text-null": _json(lambda r, a: _hits(r, {"document": {"id": "d1", "contents": None}})),
        "s-id-dict": _json(lambda r, a: _hits(r, {"document": {"id": {"x": 1}, "contents": "t\nx"}})),
        "s-score-nan": _json(lambda r, a: _hits(r, {**HIT, "score": "NaN"})),
        "s-too-many": _json(lambda r, a: _hits(r, HIT, per_query=50)),
        "s-big-doc": _json(
            lambda r, a: _hits(r, {"document": {"id": "d", "contents": "t\n" + "x" * 10_000_000}})
        ),
        "s-bare": _json(lambda r, a: _hits(r, HIT["document"])),
        "s-errors": _json(
            lambda r, a: json.dumps({"result": [[]], "errors": ["\x1b[2Jindex offline"]}).encode()
        ),
    }
)


def _hang(handler: BaseHTTPRequestHandler, req: dict, arg: str) -> None:
    time.sleep(HANG_S)  # the client's timeout ends the call long before this


def _trickle(handler: BaseHTTPRequestHandler, req: dict, arg: str) -> None:
    """Headers at once, then a byte every 0.2 s: never idle long enough for a read timeout to fire."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    deadline = time.monotonic() + HANG_S
    with contextlib.suppress(OSError):
        handler.wfile.write(b'{"choices": [')
        while time.monotonic() < deadline:
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.2)


def _huge(handler: BaseHTTPRequestHandler, req: dict, arg: str) -> None:
    """A JSON body that never ends (at most 256 MB): only a byte cap stops the client reading it."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    chunk = b'"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", ' * 800
    with contextlib.suppress(OSError):
        handler.wfile.write(b'{"choices": [')
        for _ in range(256 * 1024 * 1024 // len(chunk)):
            handler.wfile.write(chunk)


STREAMED: dict[str, Callable[[BaseHTTPRequestHandler, dict, str], None]] = {
    "hang": _hang,
    "trickle": _trickle,
    "huge": _huge,
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # every reply closes its connection: a body ends where the stream does

    def log_message(self, *args: Any) -> None:  # the suite's output is its table
        pass

    def _mode(self) -> tuple[str, str]:
        mode, _, arg = self.path.strip("/").split("/")[0].partition("~")
        return mode, unquote(arg)

    def do_GET(self) -> None:  # /<mode>/v1/models: the start-up probe
        mode, arg = self._mode()
        if mode in ("huge", "get-hang"):  # an endless listing, or none at all
            STREAMED["hang" if mode == "get-hang" else mode](self, {}, arg)
            return
        self._send(200, json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode())

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            req = {}
        mode, arg = self._mode()
        self.server.requests[mode] = self.server.requests.get(mode, 0) + 1  # type: ignore[attr-defined]
        if mode in STREAMED:
            STREAMED[mode](self, req, arg)
            return
        status, payload, ctype = SIMPLE.get(mode, SIMPLE["404-html"])(req, arg)
        self._send(status, payload, ctype)

    def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)


class HostileServer:
    """The running server: ``url(mode)`` is an OpenAI-compatible base URL, ``search_url(mode)`` a retrieval
    server's; ``requests[mode]`` counts the POSTs each mode got (to see retries)."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.root = f"http://127.0.0.1:{server.server_address[1]}"

    def url(self, mode: str) -> str:
        return f"{self.root}/{mode}/v1"

    def search_url(self, mode: str) -> str:
        return f"{self.root}/{mode}"

    def count(self, mode: str) -> int:
        return self.server.requests.get(mode.partition("~")[0], 0)  # type: ignore[attr-defined]


@contextlib.contextmanager
def hostile_server() -> Iterator[HostileServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.requests = {}  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, name="hostile-endpoint", daemon=True)
    thread.start()
    try:
        yield HostileServer(server)
    finally:
        server.shutdown()
        server.server_close()
