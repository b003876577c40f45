"""The OpenAI-compatible client over real HTTP against `sesa policy serve`'s app (vLLM's fields)."""

import asyncio

import pytest

from sesa_graph.policy import GenerationRequest, PolicyUnavailableError, SamplingParams

pytestmark = pytest.mark.slow


def test_round_trips_token_ids_and_logprobs(local_policy):
    from sesa_graph.policy.openai_client import OpenAIPolicy
    from sesa_graph.policy.serve import build_app
    from tools.server import running_app

    msgs = [{"role": "user", "content": "Write <search>Eiffel Tower</search> and nothing else."}]
    sp = SamplingParams(max_tokens=24, temperature=0, stop=("</search>", "</answer>"))
    prompt = local_policy.encode_messages(msgs)
    (local,) = asyncio.run(local_policy.generate([GenerationRequest(prompt_ids=prompt, sampling=sp)]))
    with running_app(build_app(local_policy)) as url:
        client = OpenAIPolicy(f"{url}/v1", "embedded", retries=0)
        (remote,) = asyncio.run(client.generate([GenerationRequest(prompt_ids=prompt, sampling=sp)]))
    assert remote.prompt_ids == prompt
    assert remote.token_ids == local.token_ids
    assert remote.logprobs == pytest.approx(local.logprobs, abs=1e-4)
    assert remote.text == local.text
    assert remote.finish_reason == local.finish_reason


def test_dead_endpoint_is_retried_then_named():
    import socket

    from sesa_graph.policy.openai_client import OpenAIPolicy

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    client = OpenAIPolicy(f"http://127.0.0.1:{port}/v1", "embedded", retries=2, backoff_s=0.01, timeout_s=2)
    with pytest.raises(PolicyUnavailableError, match=f"127.0.0.1:{port}"):
        asyncio.run(client.generate([GenerationRequest(prompt_ids=[1, 2, 3])]))


def test_a_turn_never_asks_for_more_than_the_server_context(local_policy):
    from sesa_graph.policy.openai_client import OpenAIPolicy
    from sesa_graph.policy.serve import build_app
    from tools.server import running_app

    prompt = local_policy.encode_messages([{"role": "user", "content": "Count: one two three four"}])
    sp = SamplingParams(max_tokens=64, temperature=0)
    with running_app(build_app(local_policy)) as url:
        client = OpenAIPolicy(f"{url}/v1", "embedded", retries=0, max_context=len(prompt) + 3)
        (short,) = asyncio.run(client.generate([GenerationRequest(prompt_ids=prompt, sampling=sp)]))
        full = OpenAIPolicy(f"{url}/v1", "embedded", retries=0, max_context=len(prompt))
        (none,) = asyncio.run(full.generate([GenerationRequest(prompt_ids=prompt, sampling=sp)]))
    assert len(short.token_ids) <= 3
    assert none.token_ids == [] and none.finish_reason == "length"  # no request that would be a 400
