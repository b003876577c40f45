"""Retrieval server: serves any search backend with the Search-R1/SSP ``/retrieve`` API.

``POST /retrieve {"queries": [...], "topk": k, "return_scores": bool}`` ->
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` (bare documents when
``return_scores`` is false), ``contents = "Title"\\ntext``; ``GET /status`` -> backend, corpus size, uptime.
Existing Search-R1 clients (and :class:`tools.http.HttpBackend`) work against it unchanged.

Run it with ``sesa search serve --backend bm25 --port 8000``.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, Field

from tools.backends import SearchBackend
from tools.corpus import Doc, join_contents
from tools.errors import UserError


class PortInUseError(UserError, OSError):
    """The server's port is taken; the message names it."""


class RetrieveRequest(BaseModel):
    queries: list[str] = Field(description="Search queries; a blank one gets an empty result list.")
    topk: int | None = Field(None, ge=1, description="Documents per query; the server's default if unset.")
    return_scores: bool = Field(False, description="Wrap each document as {document, score}.")


def create_app(backend: SearchBackend, default_k: int = 3) -> FastAPI:
    app = FastAPI(title="sesa-graph retrieval server")
    started = time.monotonic()
    docs = getattr(backend, "docs", None)

    @app.post("/retrieve")
    def retrieve(req: RetrieveRequest) -> dict:
        results = backend.search(req.queries, k=req.topk or default_k)
        return {"result": [[_hit(d, req.return_scores) for d in docs_] for docs_ in results]}

    @app.get("/status")
    def status() -> dict:
        return {
            "backend": backend.name,
            "corpus_size": len(docs) if docs is not None else None,
            "uptime_s": round(time.monotonic() - started, 3),
        }

    return app


def _hit(doc: Doc, with_score: bool) -> dict:
    document = {"id": doc.id, "contents": join_contents(doc)}
    return {"document": document, "score": doc.score} if with_score else document


def bind_socket(host: str = "127.0.0.1", port: int = 8000) -> socket.socket:
    """Bind (and return) the listening socket up front, so a taken port is a clear error, not a uvicorn log."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is not "in use"
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise PortInUseError(
                e.errno, f"port {port} on {host} is already in use; stop what holds it or pick another --port"
            ) from e
        raise OSError(e.errno, f"cannot bind {host}:{port}: {e.strerror}") from e
    sock.set_inheritable(True)
    return sock


def _uvicorn(app: FastAPI, sock: socket.socket, log_level: str) -> uvicorn.Server:
    host, port = sock.getsockname()[:2]
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level))


def serve_app(
    app: FastAPI,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    sock: socket.socket | None = None,
) -> None:
    """Serve any FastAPI app until interrupted; a taken port is a :class:`PortInUseError` before start-up."""
    sock = sock or bind_socket(host, port)
    _uvicorn(app, sock, log_level).run(sockets=[sock])


@contextmanager
def running_app(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve any FastAPI app from a background thread; yields the base URL (``port=0``: a free port)."""
    sock = bind_socket(host, port)
    server = _uvicorn(app, sock, log_level="warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on {host}:{sock.getsockname()[1]} did not start")
            time.sleep(0.01)
        yield f"http://{f'[{host}]' if ':' in host else host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def serve(
    backend: SearchBackend,
    host: str = "127.0.0.1",
    port: int = 8000,
    default_k: int = 3,
    log_level: str = "info",
    sock: socket.socket | None = None,
) -> None:
    """Serve ``backend`` until interrupted. Raises :class:`PortInUseError` before starting if the port is
    taken; ``sock``: an already bound socket (from :func:`bind_socket`) to serve on instead."""
    serve_app(create_app(backend, default_k), host, port, log_level, sock)


@contextmanager
def running_server(
    backend: SearchBackend, host: str = "127.0.0.1", port: int = 0, default_k: int = 3
) -> Iterator[str]:
    """Serve ``backend`` from a background thread; yields the base URL (``port=0``: a free port)."""
    with running_app(create_app(backend, default_k), host, port) as url:
        yield url
