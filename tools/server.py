"""Retrieval server: serves any search backend with the Search-R1/SSP ``/retrieve`` API.

``POST /retrieve {"queries": [...], "topk": k, "return_scores": bool}`` ->
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` (bare documents when
``return_scores`` is false), ``contents = "Title"\\ntext``; ``GET /status`` -> backend, corpus size, uptime.
Existing Search-R1 clients (and :class:`tools.http.HttpBackend`) work against it unchanged.

Run it with ``sesa search serve --backend bm25 --port 8000``.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StrictBool, StrictInt, StrictStr

from tools.backends import SearchBackend
from tools.corpus import Doc, join_contents
from tools.errors import UserError
from tools.ports import bind_error_message, family
from tools.request_body import BadRequest, JsonBodyGuard

log = logging.getLogger(__name__)


class PortInUseError(UserError, OSError):
    """The server's port is taken; the message names it."""


class HostError(UserError, ValueError):
    """The interface to bind is unusable; the message names the flag."""


# Bounds on one request, so no client can make the server build a giant answer or hold a worker for
# minutes; rollouts send one short query at a time, far inside them.
MAX_TOPK = 100
MAX_QUERIES = 512
MAX_QUERY_CHARS = 4096


class RetrieveRequest(BaseModel):
    queries: list[StrictStr] = Field(description="Search queries; a blank one gets an empty result list.")
    topk: StrictInt | None = Field(None, description="Documents per query; the server's default if unset.")
    return_scores: StrictBool = Field(False, description="Wrap each document as {document, score}.")


def _invalid(field: list, msg: str) -> JSONResponse:
    # FastAPI's own 422 shape, so clients read one format for every validation error.
    detail = [{"type": "value_error", "loc": ["body", *field], "msg": f"{'.'.join(map(str, field))}: {msg}"}]
    return JSONResponse(status_code=422, content={"detail": detail})


def _detail(exc: BadRequest) -> dict:
    # a refused body in the same shape as the route's own 422s
    loc = ["body", *([exc.param] if exc.param else [])]
    return {"detail": [{"type": "value_error", "loc": loc, "msg": exc.message}]}


def create_app(
    backend: SearchBackend,
    default_k: int = 3,
    max_topk: int = MAX_TOPK,
    max_queries: int = MAX_QUERIES,
    max_query_chars: int = MAX_QUERY_CHARS,
) -> FastAPI:
    app = FastAPI(title="sesa-graph retrieval server")
    # bounded bodies, and no NaN reaching a 422 that cannot be serialised (a bare 500)
    app.add_middleware(JsonBodyGuard, paths={"/retrieve"}, render=_detail)
    started = time.monotonic()
    docs = getattr(backend, "docs", None)

    @app.post("/retrieve")
    def retrieve(req: RetrieveRequest):
        if req.topk is not None and not 1 <= req.topk <= max_topk:
            return _invalid(["topk"], f"must be between 1 and {max_topk}, got {req.topk}")
        if len(req.queries) > max_queries:
            return _invalid(["queries"], f"{len(req.queries)} queries, at most {max_queries} per request")
        for i, q in enumerate(req.queries):
            if len(q) > max_query_chars:
                return _invalid(["queries", i], f"{len(q)} characters, at most {max_query_chars}")
        results, errors = _search_isolated(backend, req.queries, req.topk or default_k)
        if errors and len(errors) == sum(1 for q in req.queries if q.strip()):
            # Nothing succeeded: a 5xx, so the client retries as it does for any server fault.
            return JSONResponse(status_code=503, content={"detail": "search failed", "errors": errors})
        body: dict = {"result": [[_hit(d, req.return_scores) for d in docs_] for docs_ in results]}
        if errors:
            body["errors"] = errors
        return body

    @app.get("/status")
    def status() -> dict:
        return {
            "backend": backend.name,
            "corpus_size": len(docs) if docs is not None else None,
            "uptime_s": round(time.monotonic() - started, 3),
        }

    return app


def _search_isolated(
    backend: SearchBackend, queries: list[str], k: int
) -> tuple[list[list[Doc]], list[dict]]:
    """Search the batch; if that fails, each query alone, so one query the backend chokes on costs only
    its own result. Returns the results and one ``{"index", "error"}`` per failed query."""
    try:
        return backend.search(queries, k=k), []
    except Exception:  # noqa: BLE001 -- any backend fault: find the queries that cause it
        log.warning("search of a batch of %d queries failed; retrying them one by one", len(queries))
    results: list[list[Doc]] = []
    errors: list[dict] = []
    for i, q in enumerate(queries):
        try:
            (docs,) = backend.search([q], k=k)
        except Exception as e:  # noqa: BLE001 -- reported to the client, logged here
            log.warning("query %d failed: %s: %s", i, type(e).__name__, e)
            errors.append({"index": i, "error": f"{type(e).__name__}: {e}"[:300]})
            docs = []
        results.append(docs)
    return results, errors


def _hit(doc: Doc, with_score: bool) -> dict:
    document = {"id": doc.id, "contents": join_contents(doc)}
    return {"document": document, "score": doc.score} if with_score else document


def bind_socket(host: str = "127.0.0.1", port: int = 8000) -> socket.socket:
    """Bind (and return) the listening socket up front, so a taken port is a clear error, not a uvicorn log."""
    if not host.strip():
        # socket.bind treats "" as every interface: an empty --host must not expose the server.
        raise HostError("--host is empty; give 127.0.0.1 (this machine only) or the interface to serve on")
    if not 0 <= port <= 65535:
        # socket.bind raises OverflowError, which no caller reads as the user's mistake
        raise HostError(f"--port {port} is not a TCP port; give one in 1-65535 (0: any free one)")
    if not _loopback(host):
        log.warning(
            "binding %s:%d: the server is reachable from other machines, with no authentication", host, port
        )
    sock = socket.socket(family(host), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is not "in use"
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise PortInUseError(
                e.errno, f"port {port} on {host} is already in use; stop what holds it or pick another --port"
            ) from e
        raise HostError(bind_error_message(host, port, e)) from e
    sock.set_inheritable(True)
    return sock


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _uvicorn(app: FastAPI, sock: socket.socket, log_level: str) -> uvicorn.Server:
    host, port = sock.getsockname()[:2]
    # a stop (Ctrl-C, SIGTERM, the end of a run) must not wait for requests whose clients are gone
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=10)
    return uvicorn.Server(config)


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
