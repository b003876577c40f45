"""`sesa policy serve`'s request checks and error bodies, over the official openai client, on a stub policy.

The stub stands in for the model (it echoes the prompt back) so that every refusal is checked in
milliseconds; tests/policy/test_serve_openai.py runs the same client against the real embedded model.
"""

from __future__ import annotations

import json

import openai
import pytest
from fastapi.testclient import TestClient

from sesa_graph.policy.base import GenerationResult
from sesa_graph.policy.local import LocalPolicy
from sesa_graph.policy.serve import build_app


class _Tokenizer:
    def decode(self, ids, **_):
        return "".join(chr(96 + i % 26) for i in ids)

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True, **kwargs):
        if kwargs.get("explode"):
            raise ValueError("the template does not know 'explode'")
        return [1 + len(m["content"]) % 50 for m in messages] + ([99] if add_generation_prompt else [])


class StubPolicy:
    """What the app reads from a LocalPolicy; ``generate`` answers 'abcd...' and records what it got."""

    name, path, max_context, vocab_size = "stub", "/models/stub", 64, 100
    check_prompt_ids = LocalPolicy.check_prompt_ids

    def __init__(self) -> None:
        self.tokenizer = _Tokenizer()
        self.seen: list = []

    def encode_text(self, text: str) -> list[int]:
        return [ord(c) % 100 for c in text]

    async def generate(self, requests):
        self.seen.extend(requests)
        r = requests[0]
        ids, stop = [], None
        while (
            len(ids) < min(r.sampling.max_tokens, 5) and stop is None
        ):  # as LocalPolicy: ids end at the stop
            ids.append(len(ids) + 1)
            stop = next((s for s in r.sampling.stop if s in self.tokenizer.decode(ids)), None)
        finish = "stop" if stop else "length"
        return [
            GenerationResult(self.tokenizer.decode(ids), ids, [-0.5] * len(ids), r.prompt_ids, finish, stop)
        ]


@pytest.fixture
def stub():
    return StubPolicy()


@pytest.fixture
def client(stub):
    http = TestClient(build_app(stub))
    return openai.OpenAI(base_url="http://testserver/v1", api_key="x", http_client=http, max_retries=0)


def _refused(call, param: str, status: int = 400) -> str:
    with pytest.raises(openai.APIStatusError) as info:
        call()
    assert info.value.status_code == status
    assert info.value.body["param"] == param  # the error names the field
    return info.value.body["message"]


@pytest.mark.parametrize(
    ("options", "param", "says"),
    [
        ({"max_tokens": -5}, "max_tokens", "at least 1"),
        ({"max_tokens": 0}, "max_tokens", "at least 1"),
        ({"max_tokens": 100}, "max_tokens", "context is 64"),
        ({"temperature": -1}, "temperature", ">= 0"),
        ({"top_p": 0}, "top_p", "(0, 1]"),
        ({"top_p": 1.5}, "top_p", "(0, 1]"),
        ({"n": 2}, "n", "use vLLM"),
        ({"echo": True}, "echo", "use vLLM"),
        ({"logprobs": 5}, "logprobs", "use vLLM"),
        ({"best_of": 3}, "best_of", "use vLLM"),
        ({"presence_penalty": 1.0}, "presence_penalty", "use vLLM"),
        ({"logit_bias": {"1": 5}}, "logit_bias", "use vLLM"),
        ({"stop": [""]}, "stop", "empty stop"),
        ({"seed": -1}, "seed", "seed"),
        ({"extra_body": {"max_tokens": True}}, "max_tokens", "valid integer"),
        ({"extra_body": {"foo": 1}}, "foo", "unknown field"),
    ],
)
def test_completion_options_out_of_range_or_unsupported_are_refused_by_name(
    client, stub, options, param, says
):
    kwargs = {"model": "stub", "prompt": "hello", "max_tokens": 4, **options}
    assert says in _refused(lambda: client.completions.create(**kwargs), param)
    assert stub.seen == []  # refused before it reached the policy


@pytest.mark.parametrize(
    ("prompt", "says"),
    [
        ([1, 100], "token id 100 is outside the vocabulary [0, 100)"),
        ([3, -1], "token id -1"),
        ("", "prompt is empty"),
        ([], "prompt is empty"),
        (["a", "b"], "one request per prompt"),
        ([[1, 2], [3]], "one request per prompt"),
        ([7] * 64, "the prompt has 64 tokens and the model's context is 64"),
    ],
)
def test_bad_prompts_are_refused_naming_the_prompt(client, stub, prompt, says):
    assert says in _refused(
        lambda: client.completions.create(model="stub", prompt=prompt, max_tokens=1), "prompt"
    )
    assert stub.seen == []


def test_an_unknown_model_is_a_404_naming_the_served_one(client):
    msg = _refused(lambda: client.completions.create(model="gpt-4", prompt="hi"), "model", 404)
    assert "'gpt-4'" in msg and "'stub'" in msg
    msgs = [{"role": "user", "content": "hi"}]
    _refused(lambda: client.chat.completions.create(model="gpt-4", messages=msgs), "model", 404)
    _refused(lambda: client.models.retrieve("gpt-4"), "model", 404)
    assert [m.id for m in client.models.list()] == ["stub"]
    assert client.models.retrieve("stub").id == "stub"


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages[0]",
        ),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"top_logprobs": 3, "logprobs": True}, "top_logprobs"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"extra_body": {"chat_template_kwargs": {"explode": True}}}, "chat_template_kwargs"),
    ],
)
def test_bad_chat_requests_are_refused_by_name(client, stub, options, param):
    kwargs = {"model": "stub", "messages": [{"role": "user", "content": "hi"}], **options}
    _refused(lambda: client.chat.completions.create(**kwargs), param)
    assert stub.seen == []


def test_chat_renders_the_template_and_passes_the_sampling_through(client, stub):
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]
    out = client.chat.completions.create(
        model="stub",
        messages=msgs,
        max_tokens=3,
        temperature=0.5,
        top_p=0.9,
        seed=7,
        stop=["c"],
        logprobs=True,
    )
    (req,) = stub.seen
    assert req.prompt_ids == [9, 3, 99]  # the stub template: one id per message, then the generation prompt
    assert (req.sampling.max_tokens, req.sampling.temperature, req.sampling.top_p) == (3, 0.5, 0.9)
    assert (req.sampling.stop, req.sampling.seed) == (("c",), 7)
    choice = out.choices[0]
    assert choice.message.content == "ab"  # "abc" cut before its stop string, as vLLM returns it
    assert choice.finish_reason == "stop"
    assert [t.logprob for t in choice.logprobs.content] == [-0.5] * 3
    assert out.model == "stub" and out.usage.completion_tokens == 3


def test_completion_returns_vllm_fields_and_keeps_the_stop_string_when_asked(client):
    out = client.completions.create(
        model="stub",
        prompt=[5, 6],
        max_tokens=4,
        stop="bc",
        logprobs=0,
        extra_body={"return_token_ids": True, "include_stop_str_in_output": True},
    )
    choice = out.choices[0]
    assert choice.text == "abc" and choice.finish_reason == "stop"
    assert choice.model_extra["token_ids"] == [1, 2, 3] and choice.model_extra["prompt_token_ids"] == [5, 6]
    assert choice.logprobs.token_logprobs == [-0.5] * 3


def test_streaming_sends_the_whole_completion_then_done(client):
    chunks = list(
        client.completions.create(
            model="stub", prompt="hi", max_tokens=2, stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "ab"
    assert chunks[-1].usage.completion_tokens == 2
    msgs = [{"role": "user", "content": "hi"}]
    chat = list(client.chat.completions.create(model="stub", messages=msgs, max_tokens=2, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chat) == "ab"
    assert chat[-1].choices[0].finish_reason == "length"


def test_a_body_that_is_not_json_is_a_400(stub):
    r = TestClient(build_app(stub)).post(
        "/v1/completions", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and "not valid JSON" in json.loads(r.content)["error"]["message"]


def test_a_failed_generation_is_a_500_for_that_request_only(stub):
    async def boom(requests):
        raise RuntimeError("model fell over")

    stub.generate = boom
    r = TestClient(build_app(stub)).post("/v1/completions", json={"prompt": "hi"})
    assert r.status_code == 500 and "model fell over" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("raw", "param", "says"),
    [
        (b'{"prompt": "hi", "temperature": NaN}', "temperature", "NaN"),
        (b'{"prompt": "hi", "temperature": 1e-300}', "temperature", "0 (greedy) or >= 0.01"),
        (b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None, "deeper than"),
    ],
)
def test_values_that_broke_generation_are_a_400_before_it(stub, raw, param, says):
    r = TestClient(build_app(stub)).post(
        "/v1/completions", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and says in r.json()["error"]["message"]
    assert r.json()["error"]["param"] == param and stub.seen == []
