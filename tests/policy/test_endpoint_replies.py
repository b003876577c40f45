"""What model endpoints send back is checked before it becomes data: the completion and chat reply checks
(sesa_graph.policy.replies), the body reading and JSON parsing under them (tools.replies), and the clients
that use them (OpenAIPolicy, ChatEndpoint) against an httpx mock transport: a bad reply is a BadReplyError
naming the URL and the field, sent once (never retried), a 4xx carries the server's message, a 5xx is
retried. The same replies over a real socket, and through `sesa rollout`, are rows of tests/hostile."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from types import SimpleNamespace

import httpx
import pytest

from sesa_graph.policy.base import BadReplyError, GenerationRequest, PolicyUnavailableError, SamplingParams
from sesa_graph.policy.replies import chat_reply, completion, reply_cap, vocab_limit
from tools.errors import ServiceError
from tools.replies import (
    RefusedError,
    ReplyError,
    RetriableStatus,
    aread_capped,
    check_status,
    parse_json,
    read_capped,
)

URL = "http://127.0.0.1:9/v1"


def _choice(**over):
    return {
        "text": "ab",
        "token_ids": [5, 6],
        "logprobs": {"token_logprobs": [-0.5, -1.0]},
        "finish_reason": "stop",
        **over,
    }


def _body(**over):
    return {"choices": [_choice(**over)]}


def test_a_valid_completion_is_taken_as_it_is():
    c = completion(_body(), vocab=10, max_tokens=2)
    assert (c.token_ids, c.logprobs, c.finish_reason) == ([5, 6], [-0.5, -1.0], "stop")
    assert completion(_body(token_ids=[9, 0]), vocab=10, max_tokens=2).token_ids == [9, 0]  # both ends


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"token_ids": [5, 10]}, "token_ids[1] is 10, outside the vocabulary (0..9)"),
        ({"token_ids": [-1, 5]}, "token_ids[0] is -1"),
        ({"token_ids": [5, "6"]}, "token_ids[1] is str"),
        ({"token_ids": [5, True]}, "token_ids[1] is bool"),
        ({"token_ids": [5, 6.0]}, "token_ids[1] is float"),
        ({"token_ids": "5 6"}, "token_ids is the string"),
        ({"logprobs": {"token_logprobs": [-0.5, math.nan]}}, "token_logprobs[1] is nan, not a finite"),
        ({"logprobs": {"token_logprobs": [-math.inf, -0.5]}}, "token_logprobs[0] is -inf"),
        ({"logprobs": {"token_logprobs": ["NaN", -0.5]}}, "token_logprobs[0] is the string 'NaN'"),
        ({"logprobs": {"token_logprobs": [None, -0.5]}}, "token_logprobs[0] is null"),
        ({"logprobs": {"token_logprobs": [0.5, -0.5]}}, "never above 0"),
        ({"logprobs": {"token_logprobs": [-0.5]}}, "1 entries for 2 token ids"),
        ({"logprobs": {"token_logprobs": [-0.5] * 3}}, "3 entries for 2 token ids"),
        ({"logprobs": {"tokens": ["a", "b"]}}, "logprobs.token_logprobs is missing"),
        ({"logprobs": [-0.5, -0.5]}, "choices[0].logprobs is a list, not an object"),
        ({"text": 5}, "choices[0].text is the number 5, not a string"),
        ({"text": None}, "choices[0].text is missing"),
        ({"finish_reason": "abort"}, "finish_reason is 'abort'"),
        ({"finish_reason": 1}, "finish_reason is the number 1"),
    ],
)
def test_a_bad_field_is_named(over, field):
    with pytest.raises(ReplyError) as err:
        completion(_body(**over), vocab=10, max_tokens=2)
    assert field in str(err.value)


def test_more_tokens_than_asked_are_refused():
    body = _body(token_ids=[5] * 100, logprobs={"token_logprobs": [-0.1] * 100})
    with pytest.raises(ReplyError, match="100 tokens, more than the 2 asked for"):
        completion(body, vocab=10, max_tokens=2)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "reply.choices is missing"),
        ({"choices": None}, "reply.choices is missing"),
        ({"choices": {"0": _choice()}}, "reply.choices is an object, not a list"),
        ({"choices": []}, "0 choices"),
        ({"choices": [_choice(), _choice()]}, "2 choices"),
        ({"choices": ["ab"]}, "choices[0] is not an object"),
        ([1, 2], "reply is a list, not an object"),
        ("ok", "reply is the string 'ok', not an object"),
    ],
)
def test_a_bad_shape_is_named(body, message):
    with pytest.raises(ReplyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        completion(body, vocab=10, max_tokens=2)


def test_a_server_without_token_ids_is_told_apart_from_a_bad_one():
    """An old vLLM sends no token ids at all: the client says which server to start instead."""
    c = completion(_body(token_ids=None), vocab=10, max_tokens=2)
    assert c.token_ids is None and c.logprobs == [-0.5, -1.0]


def test_chat_replies():
    assert chat_reply({"choices": [{"message": {"content": "Correct"}, "finish_reason": "stop"}]}) == (
        "Correct",
        "stop",
    )
    assert chat_reply({"choices": [{"message": {"content": None}}]}) == ("", None)  # cut off while thinking
    for body, message in [
        ({"choices": [{"message": {"content": 42}}]}, "content is the number 42"),
        ({"choices": [{"message": {"content": [{"text": "x"}]}}]}, "content is a list"),
        ({"choices": [{"text": "Correct"}]}, "choices[0].message is missing"),
        ({"object": "chat.completion"}, "reply.choices is missing"),
    ]:
        with pytest.raises(ReplyError, match=message.replace("[", r"\[").replace("]", r"\]")):
            chat_reply(body)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "empty body"),
        (b"   \n", "empty body"),
        (b"<!DOCTYPE html><h1>502 Bad Gateway</h1>", "an HTML page"),
        (b"Service Unavailable", "not JSON"),
        (b'{"choices": [', "not JSON"),
        (b'{"a": "\xff"}', "not JSON (UnicodeDecodeError)"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_bodies_that_are_not_json(raw, message):
    with pytest.raises(ReplyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_json(raw)


def test_a_quoted_body_shows_control_characters_visibly():
    with pytest.raises(ReplyError) as err:
        parse_json(b"\x1b]0;owned\x07 not json")
    assert "\x1b" not in str(err.value) and "\\x1b" in str(err.value)


def test_nan_literals_parse_so_that_the_field_check_names_them():
    assert math.isnan(parse_json(b'{"x": NaN}')["x"])
    with pytest.raises(ReplyError, match=r"token_logprobs\[0\] is nan"):
        completion(
            json.loads(
                '{"choices": [{"text": "", "token_ids": [1], "finish_reason": "stop", '
                '"logprobs": {"token_logprobs": [NaN]}}]}'
            ),
            vocab=10,
            max_tokens=1,
        )


def test_statuses():
    check_status(200, b"{}")
    with pytest.raises(RefusedError, match="HTTP 400: too long"):
        check_status(400, b'{"error": {"message": "too long", "code": 400}}')
    with pytest.raises(RefusedError, match="HTTP 422: field required"):
        check_status(422, b'{"detail": "field required"}')
    with pytest.raises(RefusedError, match=r"HTTP 404: <html>"):
        check_status(404, b"<html>404</html>")
    with pytest.raises(RefusedError, match=r"HTTP 403: \(no message\)"):
        check_status(403, b"")
    for status in (500, 503, 429):
        with pytest.raises(RetriableStatus, match=f"HTTP {status}"):
            check_status(status, b"busy")


def test_bodies_are_read_up_to_a_cap():
    assert read_capped([b"ab", b"cd"], 4) == b"abcd"
    with pytest.raises(ReplyError, match="over 4 bytes"):
        read_capped([b"ab", b"cd", b"e"], 4)

    def endless():
        while True:
            yield b"x" * 1024

    with pytest.raises(ReplyError, match="over 10000 bytes"):
        read_capped(endless(), 10_000)

    async def chunks():
        for _ in range(10):
            yield b"x" * 10

    with pytest.raises(ReplyError, match="over 50 bytes"):
        asyncio.run(aread_capped(chunks(), 50))
    assert reply_cap(100) > reply_cap(10) > reply_cap(0) > 0


def test_the_vocabulary_is_the_model_configs_else_the_tokenizers(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 64}))

    class Tok:
        def __len__(self):
            return 60

    assert vocab_limit(Tok(), str(tmp_path)) == 64  # the embedding's rows, padded past the tokenizer
    assert vocab_limit(Tok(), str(tmp_path / "missing")) == 60
    assert vocab_limit(object(), None) is None


# ---- the clients ----------------------------------------------------------------------------------------


class _Tok:
    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))

    def __len__(self):
        return 10


@pytest.fixture
def small_tokenizer(monkeypatch):
    fake = SimpleNamespace(
        AutoTokenizer=SimpleNamespace(from_pretrained=lambda *a, **k: _Tok()),
        AutoConfig=SimpleNamespace(from_pretrained=lambda *a, **k: SimpleNamespace(vocab_size=10)),
    )
    monkeypatch.setitem(sys.modules, "transformers", fake)


def _policy(reply, seen):
    """An OpenAIPolicy whose server answers ``reply(request_json) -> httpx.Response``."""
    from sesa_graph.policy.openai_client import OpenAIPolicy

    def handle(request):
        seen.append(json.loads(request.content))
        return reply(seen[-1])

    policy = OpenAIPolicy(URL, "m", retries=2, backoff_s=0.0, deadline_s=5.0, timeout_s=2.0)
    policy._make_client = lambda url: httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return policy


def _run(policy, max_tokens=4):
    req = GenerationRequest(prompt_ids=[1, 2], sampling=SamplingParams(max_tokens=max_tokens))
    return asyncio.run(policy.generate([req]))[0]


def test_the_policy_client_takes_a_good_reply(small_tokenizer):
    seen = []
    res = _run(_policy(lambda req: httpx.Response(200, json=_body()), seen))
    assert (res.token_ids, res.logprobs, res.finish_reason) == ([5, 6], [-0.5, -1.0], "eos")
    assert seen[0]["max_tokens"] == 4 and seen[0]["return_token_ids"] is True and seen[0]["logprobs"] == 0


@pytest.mark.parametrize(
    ("response", "field"),
    [
        (httpx.Response(200, json=_body(token_ids=[5, 99])), "token_ids[1] is 99"),
        (
            httpx.Response(
                200,
                content=b'{"choices": [{"text": "", "token_ids": [1], "finish_reason": "stop", '
                b'"logprobs": {"token_logprobs": [NaN]}}]}',
            ),
            "token_logprobs[0] is nan",
        ),
        (httpx.Response(200, json={"detail": "ok"}), "reply.choices is missing"),
        (httpx.Response(200, text="<html>Gateway</html>"), "an HTML page"),
        (
            httpx.Response(400, json={"error": {"message": "max_tokens must be at least 1"}}),
            "HTTP 400: max_tokens must",
        ),
    ],
)
def test_a_bad_reply_is_one_request_and_an_error_naming_url_and_field(small_tokenizer, response, field):
    seen = []
    with pytest.raises(BadReplyError) as err:
        _run(_policy(lambda req: response, seen))
    assert isinstance(err.value, ServiceError) and URL in str(err.value) and field in str(err.value)
    assert len(seen) == 1  # the same request would get the same answer: never retried


def test_a_5xx_is_retried_then_named(small_tokenizer):
    seen = []
    with pytest.raises(PolicyUnavailableError, match="failed after 3 attempts.*HTTP 503: warming up") as err:
        _run(_policy(lambda req: httpx.Response(503, json={"detail": "warming up"}), seen))
    assert not isinstance(err.value, BadReplyError) and len(seen) == 3


def test_a_5xx_then_a_good_reply_recovers(small_tokenizer):
    seen = []
    replies = iter([httpx.Response(502, text="bad gateway"), httpx.Response(200, json=_body())])
    assert _run(_policy(lambda req: next(replies), seen)).token_ids == [5, 6]


def test_too_many_tokens_for_the_turn_are_refused(small_tokenizer):
    body = _body(token_ids=[5] * 200, logprobs={"token_logprobs": [-0.1] * 200})
    with pytest.raises(BadReplyError, match="200 tokens, more than the 4 asked for"):
        _run(_policy(lambda req: httpx.Response(200, json=body), []))


def test_the_chat_endpoint_checks_its_replies():
    from sesa_graph.policy.limits import CallLimits
    from sesa_graph.policy.templated import ChatEndpoint

    replies = {
        "good": httpx.Response(
            200, json={"choices": [{"message": {"content": "Correct"}, "finish_reason": "stop"}]}
        ),
        "int": httpx.Response(200, json={"choices": [{"message": {"content": 7}}]}),
        "400": httpx.Response(400, json={"error": {"message": "unknown model 'x'"}}),
    }

    def chat(kind):
        ep = ChatEndpoint(URL, "x", limits=CallLimits(retries=0, deadline_s=2.0), max_tokens=8)
        ep._client = lambda: httpx.AsyncClient(transport=httpx.MockTransport(lambda r: replies[kind]))
        return asyncio.run(ep.ainvoke("Is it right?"))

    assert chat("good").text == "Correct"
    with pytest.raises(
        BadReplyError, match=r"http://127.0.0.1:9/v1 sent a bad reply: choices\[0\].message.content"
    ):
        chat("int")
    with pytest.raises(BadReplyError, match="refused the request: HTTP 400: unknown model 'x'"):
        chat("400")


# ---- the judge's and the distiller's use of replies -------------------------------------------------------


class _Results:
    """A PolicyClient returning ``results`` whatever it is asked."""

    name, tokenizer = "scripted", None

    def __init__(self, results):
        self.results = results

    async def generate(self, requests):
        return self.results

    def encode_messages(self, messages):
        return [1]

    def encode_text(self, text):
        return [1]


def test_a_distiller_answering_fewer_requests_than_asked_fails_them_all():
    from sesa_graph.memory.config import MemoryConfig
    from sesa_graph.memory.distiller import DistillerError, call_distiller

    one = SimpleNamespace(text='{"description": "d"}')
    convs = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]
    out = asyncio.run(call_distiller(_Results([one]), convs, MemoryConfig()))
    assert len(out) == 2 and all(isinstance(o, DistillerError) for o in out)
    assert "1 replies to 2 requests" in str(out[0])


def test_a_judge_reply_without_text_is_a_counted_failure_not_a_verdict():
    from sesa_graph.rollout.judge import Judge

    class Chat:
        async def ainvoke(self, messages):
            return SimpleNamespace(text=None)

    judge = Judge(Chat())
    v = asyncio.run(judge.judge("q?", "Lyon", ["Paris"]))
    assert (v.method, v.correct, judge.failed_count) == ("judge_unavailable", False, 1)
    judge = Judge(_Results([SimpleNamespace(text=7, prompt_ids=[1])]))
    v = asyncio.run(judge.judge("q?", "Lyon", ["Paris"]))
    assert (v.method, v.correct, judge.failed_count) == ("judge_unavailable", False, 1)
