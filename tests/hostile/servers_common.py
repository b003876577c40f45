"""What the servers' rows share: the real servers they talk to (started once, through ``SHARED``) and the
verdict on one HTTP reply."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.hostile.harness import SHARED, Outcome

# Rows run with their own SESA_HOME; the embedded model is converted once, in the home the suite started with.
_HOME = os.environ.get("SESA_HOME")
SERVED = "embedded"
JSON = {"content-type": "application/json"}


@contextlib.contextmanager
def _policy_server() -> Iterator[str]:
    from sesa_graph.embedded import embedded_model_dir
    from sesa_graph.policy.local import LocalPolicy
    from sesa_graph.policy.serve import build_app
    from tools.server import running_app

    row_home = os.environ.get("SESA_HOME")
    if _HOME is None:
        os.environ.pop("SESA_HOME", None)
    else:
        os.environ["SESA_HOME"] = _HOME
    try:
        path = embedded_model_dir()
    finally:
        if row_home is not None:
            os.environ["SESA_HOME"] = row_home
    policy = LocalPolicy(str(path), batch_wait_ms=20)  # threads: process-wide in torch, so left alone
    with running_app(build_app(policy, SERVED)) as url:
        yield url


@contextlib.contextmanager
def _search_server() -> Iterator[str]:
    from tools.bm25 import BM25Backend
    from tools.corpus import Doc
    from tools.server import running_server

    docs = [
        Doc("0", "Paris", "Paris is the capital of France."),
        Doc("1", "Cat", "The cat is a small mammal that hunts mice."),
    ]
    with running_server(BM25Backend(docs), default_k=1) as url:
        yield url


def policy_url() -> str:
    """The in-process policy server (``sesa policy serve --engine local``'s app) on the embedded model."""
    return SHARED.get("servers/policy", _policy_server)


def search_url() -> str:
    """The search server (``sesa search serve``'s app) on a two-document BM25 corpus."""
    return SHARED.get("servers/search", _search_server)


def post(url: str, body: Any = None, raw: bytes | None = None, headers: dict[str, str] | None = None) -> Any:
    """POST ``body`` as JSON (or ``raw`` bytes) with a plain HTTP client; the httpx response."""
    import httpx

    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(url, content=content, headers=headers or JSON, timeout=60)


def judge_reply(status: int, content: bytes, names: Sequence[str], want: int | None = None) -> Outcome:
    """A refusal is ``clear`` when it is a 4xx (``want`` if given) whose JSON body holds every string of
    ``names`` (the field, or what is wrong); a 5xx is a ``traceback``, a 2xx ``wrong``."""
    text = content.decode("utf-8", "replace")
    if status >= 500:
        return Outcome("traceback", f"{status}: {text[:160]}")
    if status < 400:
        return Outcome("wrong", f"accepted ({status}): {text[:120]}")
    try:
        body = json.loads(content)
    except ValueError:
        return Outcome("unclear", f"{status}, a body that is not JSON: {text[:120]!r}")
    flat = json.dumps(body)
    missing = [n for n in names if n.lower() not in flat.lower()]
    if missing or (want is not None and status != want):
        return Outcome("unclear", f"{status} {flat[:140]}" + (f", missing {missing}" if missing else ""))
    return Outcome("clear", f"{status} {_message(body)[:160]}")


def _message(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message"))
    if isinstance(body, dict) and isinstance(body.get("detail"), list) and body["detail"]:
        return str(body["detail"][0].get("msg"))
    return json.dumps(body)


def alive(url: str) -> str | None:
    """None when the server still answers; what went wrong otherwise (a check after a hostile request)."""
    import httpx

    try:
        r = httpx.get(url, timeout=10)
    except httpx.HTTPError as exc:
        return f"the server stopped answering: {exc}"
    return None if r.status_code == 200 else f"the server answers {r.status_code} to {url}"


def model_dir(tmp: Path) -> Path:
    """A directory a path-like --model can name (checked for existence before anything loads)."""
    (tmp / "m").mkdir(exist_ok=True)
    return tmp / "m"
