"""The official `openai` client against `sesa policy serve --engine local`'s app over HTTP, on the embedded model."""

from __future__ import annotations

import asyncio

import openai
import pytest

from sesa_graph.policy import GenerationRequest, SamplingParams

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(local_policy):
    from sesa_graph.policy.serve import build_app
    from tools.server import running_app

    with running_app(build_app(local_policy)) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="EMPTY", max_retries=0)


MESSAGES = [{"role": "user", "content": "Name three colours."}]


def test_models_list_reports_the_served_name(client):
    assert [m.id for m in client.models.list()] == ["embedded"]


def test_chat_completion_applies_the_chat_template_and_respects_stop_and_max_tokens(client, local_policy):
    sp = SamplingParams(max_tokens=12, temperature=0)
    prompt = local_policy.encode_messages(MESSAGES)
    (direct,) = asyncio.run(local_policy.generate([GenerationRequest(prompt_ids=prompt, sampling=sp)]))
    full = client.chat.completions.create(model="embedded", messages=MESSAGES, max_tokens=12, temperature=0)
    assert full.choices[0].message.content == direct.text  # the same prompt ids as the chat template gives
    assert full.usage.prompt_tokens == len(prompt) and full.usage.completion_tokens <= 12

    stop = direct.text.strip()[2:5]  # a string the greedy completion is known to reach
    cut = client.chat.completions.create(
        model="embedded", messages=MESSAGES, max_tokens=12, temperature=0, stop=[stop]
    )
    assert cut.choices[0].message.content == direct.text[: direct.text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_completions_stream_and_refusals(client):
    chunks = list(client.completions.create(model="embedded", prompt="Paris is", max_tokens=4, stream=True))
    assert "".join(c.choices[0].text for c in chunks).strip()
    # a list of one prompt is that prompt (LangChain's OpenAI completions class sends one); two are refused
    greedy = {"model": "embedded", "max_tokens": 4, "temperature": 0}
    one = client.completions.create(prompt=["Paris is"], **greedy).choices[0].text
    assert one == client.completions.create(prompt="Paris is", **greedy).choices[0].text
    with pytest.raises(openai.BadRequestError, match="a batch of 2 prompts is not supported"):
        client.completions.create(prompt=["Paris is", "Rome is"], **greedy)
    with pytest.raises(openai.BadRequestError, match="max_tokens must be at least 1"):
        client.completions.create(model="embedded", prompt="Paris is", max_tokens=-5)
    with pytest.raises(openai.NotFoundError, match="serves 'embedded'"):
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES)


def test_a_bad_request_leaves_the_requests_batched_with_it_untouched(client):
    async def burst():
        aclient = openai.AsyncOpenAI(base_url=str(client.base_url), api_key="EMPTY", max_retries=0)
        good = {"model": "embedded", "prompt": "The sky is", "max_tokens": 3, "temperature": 0}
        calls = [aclient.completions.create(**good) for _ in range(3)]
        calls.insert(1, aclient.completions.create(**{**good, "prompt": [1, 10**6]}))
        return await asyncio.gather(*calls, return_exceptions=True)

    out = asyncio.run(burst())
    assert isinstance(out[1], openai.BadRequestError) and "outside the vocabulary" in str(out[1])
    texts = {o.choices[0].text for i, o in enumerate(out) if i != 1}
    assert len(texts) == 1 and texts != {""}
