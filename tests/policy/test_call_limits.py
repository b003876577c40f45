"""Bounded calls to model endpoints: a server that accepts and never answers, and a port where nothing
listens, fail with a ServiceError naming the URL (and the setting to raise), for the policy client, the
chat endpoint, the start-up probe, the judge and the distiller. Tiny limits keep every test short."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import sys
from types import SimpleNamespace

import pytest

from sesa_graph.config import JudgeConfig
from sesa_graph.policy import factory
from sesa_graph.policy.base import GenerationRequest, PolicyUnavailableError
from sesa_graph.policy.limits import CallLimits
from sesa_graph.policy.templated import ChatEndpoint
from sesa_graph.rollout.judge import Judge, JudgeUnavailableError
from tools.errors import ServiceError

TINY = {"timeout_s": 0.3, "connect_timeout_s": 0.2, "retries": 1, "backoff_s": 0.01, "deadline_s": 1.0}


@pytest.fixture
def hanging_url():
    """A server that accepts connections (the kernel completes them into the backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


@pytest.fixture
def refused_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    return f"http://127.0.0.1:{port}/v1"


class _Tok:
    def apply_chat_template(self, messages, **kwargs):
        return [1, 2, 3]


@pytest.fixture
def no_tokenizer(monkeypatch):
    """OpenAIPolicy loads its tokenizer at construction; these requests never need a real one (and importing
    transformers alone can take longer than a test here may)."""
    fake = SimpleNamespace(AutoTokenizer=SimpleNamespace(from_pretrained=lambda *a, **k: _Tok()))
    monkeypatch.setitem(sys.modules, "transformers", fake)


def _policy(url, **limits):
    from sesa_graph.policy.openai_client import OpenAIPolicy

    return OpenAIPolicy(url, "m", **{**TINY, **limits})


def _generate(policy):
    return asyncio.run(policy.generate([GenerationRequest(prompt_ids=[1, 2, 3])]))


def _attempts(message: str) -> int:
    return int(re.search(r"after (\d+) attempts?", message).group(1))


def test_a_hanging_policy_server_fails_naming_the_url_and_the_setting(hanging_url, no_tokenizer):
    policy = _policy(hanging_url, setting="solver_policy")
    with pytest.raises(PolicyUnavailableError) as err:
        _generate(policy)
    msg = str(err.value)
    assert hanging_url in msg and _attempts(msg) == 2
    assert "raise solver_policy.timeout_s" in msg and "solver_policy.deadline_s" in msg
    assert isinstance(err.value, ServiceError)


def test_the_deadline_cuts_the_retries_short(hanging_url, no_tokenizer):
    # 20 retries of 0.3 s would take 6 s; the 0.8 s deadline leaves room for a few attempts only
    policy = _policy(hanging_url, retries=20, deadline_s=0.8)
    with pytest.raises(PolicyUnavailableError) as err:
        _generate(policy)
    assert 1 <= _attempts(str(err.value)) < 5


def test_a_refused_policy_port_is_retried_then_named(refused_url, no_tokenizer, caplog):
    with caplog.at_level(logging.WARNING), pytest.raises(PolicyUnavailableError) as err:
        _generate(_policy(refused_url, retries=2, deadline_s=5.0))
    msg = str(err.value)
    assert refused_url in msg and _attempts(msg) == 3
    assert "ConnectError" in msg and "is the server up" in msg
    assert sum(refused_url in r.getMessage() for r in caplog.records) == 2  # one warning per retry


def test_a_crashed_served_policy_stops_retrying_and_says_why(refused_url, no_tokenizer):
    from sesa_graph.policy.vllm_server import ServedPolicy

    server = SimpleNamespace(
        base_url=refused_url,
        spec=SimpleNamespace(served_name="m", max_model_len=64),
        dead=lambda: "the vLLM server for m exited with code 1",
    )
    policy = ServedPolicy(server, tokenizer="m", **{**TINY, "retries": 5})
    with pytest.raises(PolicyUnavailableError, match="exited with code 1") as err:
        _generate(policy)
    assert _attempts(str(err.value)) == 1


@pytest.mark.parametrize("which", ["hanging_url", "refused_url"])
def test_a_dead_chat_endpoint_fails_naming_the_url(which, request):
    url = request.getfixturevalue(which)
    chat = ChatEndpoint(url, "judge-m", limits=CallLimits(**TINY, setting="models.api"))
    with pytest.raises(PolicyUnavailableError) as err:
        asyncio.run(chat.ainvoke("hello"))
    msg = str(err.value)
    assert url in msg and "judge-m" in msg and _attempts(msg) == 2
    assert ("raise models.api.timeout_s" in msg) == (which == "hanging_url")
    assert chat.with_options(max_tokens=4).limits == chat.limits  # each role's copy keeps the limits


def test_a_hanging_endpoint_fails_the_start_up_probe(hanging_url):
    with pytest.raises(PolicyUnavailableError, match=re.escape(hanging_url)) as err:
        factory.probe_endpoint(hanging_url, CallLimits(**TINY), what="model 'api' endpoint")
    assert "ReadTimeout" in str(err.value) and "model 'api'" in str(err.value)


def test_endpoint_settings_reach_the_client(monkeypatch):
    from sesa_graph.model_config import EndpointConfig

    monkeypatch.setattr(factory, "probe_endpoint", lambda *a, **k: None)
    ep = EndpointConfig(base_url="http://x/v1", model="m", api="chat", timeout_s=7, deadline_s=9, retries=0)
    client = factory.endpoint_client("api", ep)
    assert (client.limits.timeout_s, client.limits.deadline_s, client.limits.retries) == (7, 9, 0)
    assert client.limits.setting == "models.api" and client.limits.connect_timeout_s == 5.0


# ---- the judge -------------------------------------------------------------------------------------------


def _openai_judge(url, monkeypatch, **cfg):
    monkeypatch.setattr(factory, "probe_endpoint", lambda *a, **k: None)
    config = JudgeConfig(kind="openai", base_url=url, model="judge-m", timeout_s=0.5, retries=1, **cfg)
    return factory.make_judge(config, policy=None, tokenizer="judge-m")


def test_a_hanging_judge_is_judge_unavailable_and_logged(hanging_url, no_tokenizer, monkeypatch, caplog):
    judge = _openai_judge(hanging_url, monkeypatch)
    with caplog.at_level(logging.WARNING):
        verdicts = asyncio.run(judge.judge_many([("q", "Milan", ["Rome"]), ("q", "Rome", ["Rome"])]))
    assert [v.method for v in verdicts] == ["judge_unavailable", "exact"]
    assert (judge.unavailable_count, judge.failed_count) == (1, 1)
    assert any(hanging_url in r.getMessage() for r in caplog.records)  # not silent


def test_a_judge_dead_for_every_call_stops_the_run(refused_url, no_tokenizer, monkeypatch):
    judge = _openai_judge(refused_url, monkeypatch, max_consecutive_failures=3)
    items = [("q", "Milan", ["Rome"]), ("q", "Paris", ["Rome"])]
    asyncio.run(judge.judge_many(items))  # 2 failures in a row: still the counted fallback
    with pytest.raises(JudgeUnavailableError) as err:
        asyncio.run(judge.judge_many(items))
    msg = str(err.value)
    assert refused_url in msg and "4 judgments in a row" in msg and "judge.kind 'none'" in msg
    assert isinstance(err.value, ServiceError)


def test_a_judge_that_answers_again_resets_the_count():
    class Flaky:
        name, tokenizer = "flaky", None

        def __init__(self):
            self.calls = 0

        async def generate(self, requests):
            self.calls += 1
            if self.calls % 2:
                raise ConnectionError("down")
            return [SimpleNamespace(text="Wrong", prompt_ids=[]) for _ in requests]

        def encode_messages(self, m):
            return []

        def encode_text(self, t):
            return []

    judge = Judge(Flaky(), max_consecutive_failures=2)
    for _ in range(4):  # fail, answer, fail, answer: never two in a row
        asyncio.run(judge.judge("q", "Milan", ["Rome"]))
    assert (judge.failed_count, judge.failures_in_a_row) == (2, 0)


def test_a_dead_chat_judge_is_judge_unavailable(refused_url):
    judge = Judge(ChatEndpoint(refused_url, "judge-m", limits=CallLimits(**TINY)), timeout_s=5)
    v = asyncio.run(judge.judge("q", "Milan", ["Rome"]))
    assert v.method == "judge_unavailable" and judge.failed_count == 1


# ---- the distiller ---------------------------------------------------------------------------------------


def test_a_dead_distiller_endpoint_is_an_error_naming_it(refused_url):
    from sesa_graph.memory.config import MemoryConfig
    from sesa_graph.memory.distiller import call_distiller

    chat = ChatEndpoint(refused_url, "distil-m", limits=CallLimits(**TINY))
    (out,) = asyncio.run(call_distiller(chat, [[{"role": "user", "content": "x"}]], MemoryConfig()))
    assert isinstance(out, PolicyUnavailableError) and refused_url in str(out)


def test_a_judge_endpoint_error_names_the_judge_setting(hanging_url, no_tokenizer, monkeypatch):
    judge = _openai_judge(hanging_url, monkeypatch)
    with pytest.raises(PolicyUnavailableError) as err:
        asyncio.run(judge.model.generate([GenerationRequest(prompt_ids=[1])]))
    msg = str(err.value)
    assert msg.startswith(f"judge endpoint {hanging_url}") and "raise judge.timeout_s (now 0.5s)" in msg
