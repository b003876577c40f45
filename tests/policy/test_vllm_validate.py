"""The front sesa puts before vLLM (sesa_graph.policy.vllm_validate): the project's strict request schema,
the same as the in-process server's, on the requests vLLM would otherwise accept and ignore or coerce."""

from __future__ import annotations

import json

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from sesa_graph.policy.serve_requests import CHAT, COMPLETIONS, ChatRequest, CompletionRequest, validate
from sesa_graph.policy.vllm_validate import RequestValidator

# what sesa_graph.policy.openai_client sends (extra_body flattened, as the openai client sends it)
CLIENT = {
    "model": "solver",
    "prompt": [1, 2, 3],
    "max_tokens": 8,
    "temperature": 1.0,
    "top_p": 1.0,
    "logprobs": 0,
    "return_token_ids": True,
    "include_stop_str_in_output": True,
    "stop": ["</search>"],
    "seed": 3,
}
CHAT_CLIENT = {  # what templated.ChatEndpoint sends (a judge, a distiller)
    "model": "judge",
    "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}],
    "temperature": 0.0,
    "max_tokens": 64,
    "chat_template_kwargs": {"enable_thinking": False},
}


@pytest.fixture
def front():
    seen = []

    async def route(request):
        seen.append(json.loads(await request.body()))
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route(p, route, methods=["POST"]) for p in (COMPLETIONS, CHAT)])
    return TestClient(RequestValidator(app)), seen


def test_what_the_project_sends_passes_unchanged(front):
    client, seen = front
    assert client.post(COMPLETIONS, json=CLIENT).status_code == 200
    assert client.post(CHAT, json=CHAT_CLIENT).status_code == 200
    assert seen == [CLIENT, CHAT_CLIENT]


def test_what_vllm_implements_and_the_local_server_refuses_passes_the_front(front):
    client, seen = front
    more = {**CLIENT, "n": 4, "logprobs": 5, "prompt": [[1, 2], [3]], "presence_penalty": 0.5, "echo": True}
    assert client.post(COMPLETIONS, json=more).status_code == 200
    tools = {**CHAT_CLIENT, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto"}
    assert client.post(CHAT, json=tools).status_code == 200
    assert len(seen) == 2


@pytest.mark.parametrize(
    ("path", "fields", "param", "says"),
    [
        (COMPLETIONS, {"frobnicate": 1}, "frobnicate", "unknown field"),
        (COMPLETIONS, {"seed": -1}, "seed", "[0, 2**63)"),
        (COMPLETIONS, {"max_tokens": "8"}, "max_tokens", "valid integer"),
        (COMPLETIONS, {"max_tokens": 8.0}, "max_tokens", "valid integer"),
        (COMPLETIONS, {"return_token_ids": "yes"}, "return_token_ids", "valid boolean"),
        (COMPLETIONS, {"logprobs": -1}, "logprobs", "[0, 20]"),
        (COMPLETIONS, {"stop": ["a", 1]}, "stop", "valid string"),
        (COMPLETIONS, {"temperature": 0.001}, "temperature", "0 (greedy) or >= 0.01"),
        (COMPLETIONS, {"prompt": [[1], [[2]]]}, "prompt", "not deeper lists"),
        (COMPLETIONS, {"best_of": 2, "n": 4}, "best_of", "[n, 64]"),
        (COMPLETIONS, {"stream_options": {"include_usage": True, "x": True}}, "stream_options", "only"),
        (CHAT, {"messages": [{"role": "user", "content": {"a": 1}}]}, "messages[0].content", "string"),
        (CHAT, {"chat_template_kwargs": "enable_thinking"}, "chat_template_kwargs", "dictionary"),
        (CHAT, {"parallel_tool_calls": "no"}, "parallel_tool_calls", "boolean"),
    ],
)
def test_unknown_or_ill_typed_fields_are_a_400_naming_the_field(front, path, fields, param, says):
    client, seen = front
    base = CLIENT if path == COMPLETIONS else CHAT_CLIENT
    r = client.post(path, json={**base, **fields})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and says in err["message"] and seen == []


def test_the_schema_is_shared_with_the_in_process_server():
    """One schema: the front validates with the same function the in-process server's parse calls."""
    from sesa_graph.policy.serve_requests import RequestError, parse

    for kind, body in ((CompletionRequest, CLIENT), (ChatRequest, CHAT_CLIENT)):
        assert validate(dict(body), kind).model_dump(exclude_unset=True) == body
    with pytest.raises(RequestError, match="use vLLM"):
        parse(json.dumps({**CLIENT, "n": 4}).encode(), CompletionRequest)  # the local server's own refusal
