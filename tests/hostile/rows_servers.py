"""Hostile requests to the real servers: ``sesa policy serve --engine local``'s app on the embedded model and
``sesa search serve``'s app, each started once, over plain HTTP. A refusal must be a 4xx whose JSON names the
field; a 5xx is a traceback, a 200 is wrong, and the server must answer its health route afterwards.
The vLLM front and the serve commands' flags are in ``rows_servers_front.py``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.hostile.harness import Outcome, Row, custom
from tests.hostile.servers_common import SERVED, alive, judge_reply, policy_url, post, search_url

AREA = "servers"
CMPL, CHAT = "/v1/completions", "/v1/chat/completions"
OK = {"model": SERVED, "prompt": "The sky is", "max_tokens": 2, "temperature": 0}
HI = [{"role": "user", "content": "hi"}]


def request(
    name: str,
    path: str,
    names: Sequence[str],
    body: Any = None,
    raw: bytes | None = None,
    want: int | None = 400,
    headers: dict[str, str] | None = None,
    server: Callable[[], str] = policy_url,
    health: str = "/health",
    timeout_s: float = 90.0,  # whichever row comes first loads the model (converted on a fresh machine)
) -> Row:
    """A row that sends one request to ``server`` and wants a 4xx naming ``names``, the server still up."""

    def run(_tmp: Path) -> Outcome:
        base = server()
        r = post(base + path, body, raw, headers)
        out = judge_reply(r.status_code, r.content, names, want)
        gone = alive(base + health)
        return Outcome("wrong", f"{out.detail}; {gone}") if gone else out

    return Row(AREA, name, run, timeout_s)


def cmpl(name: str, fields: dict[str, Any], *names: str, want: int = 400) -> Row:
    return request(f"policy {name}", CMPL, names, body={**OK, **fields}, want=want)


def chat(name: str, fields: dict[str, Any], *names: str) -> Row:
    body = {"model": SERVED, "messages": HI, "max_tokens": 2, **fields}
    return request(f"policy chat {name}", CHAT, names, body=body)


def raw(name: str, data: bytes, *names: str, want: int = 400, path: str = CMPL, **kw: Any) -> Row:
    return request(f"policy {name}", path, names, raw=data, want=want, **kw)


def nested(depth: int) -> bytes:
    return b'{"prompt": "hi", "chat_template_kwargs": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"


POLICY = [
    raw("temperature NaN", b'{"prompt": "hi", "temperature": NaN}', "temperature"),
    cmpl("temperature 1e-300", {"temperature": 1e-300}, "temperature", "greedy"),
    raw("temperature Infinity", b'{"prompt": "hi", "temperature": Infinity}', "temperature"),
    cmpl("temperature -1", {"temperature": -1}, "temperature"),
    cmpl('temperature "0.5"', {"temperature": "0.5"}, "temperature"),
    cmpl("top_p 0", {"top_p": 0}, "top_p"),
    raw("body nested 100000 deep", b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nest"),
    raw("chat_template_kwargs nested 40 deep", nested(40), "chat_template_kwargs", "nest", path=CHAT),
    raw("body not JSON", b"{prompt: hi", "not valid JSON"),
    raw("body a JSON list", b'[{"prompt": "hi"}]', "JSON object"),
    raw("body a JSON string", b'"hi"', "JSON object"),
    raw("body not UTF-8", b'{"prompt": "\xff\xfe"}', "not valid JSON"),
    raw("body empty", b"", "not valid JSON"),
    raw("integer of 5000 digits", b'{"prompt": "hi", "seed": ' + b"9" * 5000 + b"}", "not valid JSON"),
    raw("body of 9 MiB", json.dumps({"prompt": "x" * (9 * 2**20)}).encode(), "larger than", want=413),
    raw(
        "content-type text/plain",
        json.dumps(OK).encode(),
        "content-type",
        want=415,
        headers={"content-type": "text/plain"},
    ),
    cmpl("max_tokens -5", {"max_tokens": -5}, "max_tokens"),
    cmpl("max_tokens 0", {"max_tokens": 0}, "max_tokens"),
    cmpl("max_tokens 10**12", {"max_tokens": 10**12}, "max_tokens"),
    cmpl('max_tokens "8"', {"max_tokens": "8"}, "max_tokens"),
    cmpl("max_tokens true", {"max_tokens": True}, "max_tokens"),
    cmpl("logprobs 5", {"logprobs": 5}, "logprobs"),
    cmpl("logprobs -1", {"logprobs": -1}, "logprobs"),
    cmpl("prompt token id 10**6", {"prompt": [1, 10**6]}, "prompt", "vocabulary"),
    cmpl("prompt token id -1", {"prompt": [1, -1]}, "prompt"),
    cmpl('prompt ""', {"prompt": ""}, "prompt", "empty"),
    cmpl("prompt []", {"prompt": []}, "prompt", "empty"),
    cmpl("prompt missing", {"prompt": None}, "prompt"),
    # a list of one is that prompt (LangChain's OpenAI class sends one); an empty one and a real batch are not
    cmpl('prompt [""]', {"prompt": [""]}, "prompt", "empty"),
    cmpl("prompt [[]]", {"prompt": [[]]}, "prompt", "empty"),
    cmpl("prompt a batch of 2 texts", {"prompt": ["The sky is", "Grass is"]}, "prompt", "batch of 2"),
    cmpl("prompt a batch of 2 id lists", {"prompt": [[1, 2], [3]]}, "prompt", "batch of 2"),
    cmpl("prompt {}", {"prompt": {"a": 1}}, "prompt"),
    cmpl("n 10**9", {"n": 10**9}, "n"),
    cmpl("stop [1, 2]", {"stop": [1, 2]}, "stop"),
    cmpl("stop of 200 strings", {"stop": [f"s{i}" for i in range(200)]}, "stop"),
    cmpl('stop [""]', {"stop": [""]}, "stop"),
    cmpl("unknown model gpt-9", {"model": "gpt-9"}, "model", SERVED, want=404),
    cmpl("unknown field foo", {"foo": 1}, "foo"),
    cmpl("seed -1", {"seed": -1}, "seed"),
    cmpl("seed 2**64", {"seed": 2**64}, "seed"),
    cmpl("echo true", {"echo": True}, "echo"),
    cmpl("logit_bias not a dict", {"logit_bias": [1, 2]}, "logit_bias"),
    chat("messages a string", {"messages": "hi"}, "messages"),
    chat("messages []", {"messages": []}, "messages"),
    chat("100000 messages", {"messages": [{"role": "user", "content": ""}] * 100_000}, "messages", "at most"),
    chat("role tool", {"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    chat("content a number", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    chat("max_completion_tokens 0", {"max_completion_tokens": 0}, "max_completion_tokens"),
    chat("top_logprobs 21", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    chat("chat_template_kwargs a list", {"chat_template_kwargs": [1]}, "chat_template_kwargs"),
]


@custom(AREA, "policy one bad request among four concurrent", timeout_s=90)
def batch_isolation(_tmp: Path) -> Outcome:
    """The bad request is refused; the three good ones batched with it give one and the same completion."""
    import httpx

    url = policy_url() + CMPL

    async def burst() -> list[Any]:
        async with httpx.AsyncClient(timeout=60) as client:
            bodies = [OK, {**OK, "prompt": [1, 10**6]}, OK, OK]
            return await asyncio.gather(*(client.post(url, json=b) for b in bodies))

    replies = asyncio.run(burst())
    bad = judge_reply(replies[1].status_code, replies[1].content, ["prompt", "vocabulary"])
    if bad.verdict != "clear":
        return bad
    good = [r for i, r in enumerate(replies) if i != 1]
    if any(r.status_code != 200 for r in good):
        return Outcome("wrong", f"good requests answered {[r.status_code for r in good]}")
    texts = {r.json()["choices"][0]["text"] for r in good}
    if len(texts) != 1:
        return Outcome("wrong", f"greedy completions of one prompt differ: {texts}")
    return Outcome("handled", f"bad one 400, three good ones {texts}")


def retrieve(name: str, names: Sequence[str], want: int | None = None, **kw: Any) -> Row:
    return request(f"search {name}", "/retrieve", names, want=want, server=search_url, health="/status", **kw)


SEARCH = [
    retrieve("topk NaN", ["topk"], raw=b'{"queries": ["cat"], "topk": NaN}'),
    retrieve("topk Infinity", ["topk"], raw=b'{"queries": ["cat"], "topk": Infinity}'),
    retrieve('topk "3"', ["topk"], body={"queries": ["cat"], "topk": "3"}),
    retrieve("topk 0", ["topk"], body={"queries": ["cat"], "topk": 0}),
    retrieve("topk 10**9", ["topk"], body={"queries": ["cat"], "topk": 10**9}),
    retrieve("queries a string", ["queries"], body={"queries": "cat"}),
    retrieve("queries [1]", ["queries"], body={"queries": [1]}),
    retrieve("600 queries", ["queries"], body={"queries": ["cat"] * 600}),
    retrieve("query of 5000 characters", ["queries"], body={"queries": ["cat " * 1250]}),
    retrieve(
        "queries nested 100000 deep", ["nest"], raw=b'{"queries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    ),
    retrieve("body not JSON", ["not valid JSON"], raw=b"queries=cat"),
    retrieve("body a JSON list", ["JSON object"], raw=b'["cat"]'),
    retrieve("body of 9 MiB", ["larger than"], want=413, body={"queries": ["x" * (9 * 2**20)]}),
    retrieve(
        "content-type text/plain",
        ["content-type"],
        want=415,
        raw=b'{"queries": ["cat"]}',
        headers={"content-type": "text/plain"},
    ),
]


@custom(AREA, "search query of control characters and NUL")
def search_control_chars(_tmp: Path) -> Outcome:
    """A query of control characters is only text: an answer (of the right shape), not a failure."""
    r = post(search_url() + "/retrieve", {"queries": ["\x00\x1b[2J\u202ecat"], "topk": 1})
    if r.status_code != 200:
        return judge_reply(r.status_code, r.content, ["queries"])
    result = r.json().get("result")
    if not (isinstance(result, list) and len(result) == 1 and len(result[0]) <= 1):
        return Outcome("wrong", f"answer of the wrong shape: {r.text[:120]}")
    return Outcome("handled", f"200, {len(result[0])} document")


ROWS = [*POLICY, batch_isolation, *SEARCH, search_control_chars]
