"""One request that cannot be served fails only its own caller, never the batch it was generated with."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from sesa_graph.policy.base import GenerationRequest, GenerationResult
from sesa_graph.policy.local import LocalPolicy

POISON = 7  # a token the stub model cannot take: its whole batch raises, as an out-of-range id did


def _policy() -> LocalPolicy:
    p = object.__new__(LocalPolicy)  # the batching front only: the model is the stub below
    p.batch_wait_s, p.batch_max_wait_s, p.max_batch_size, p.vocab_size = 0.02, 0.5, 16, 100
    p._queues, p._workers, p._model_lock = {}, {}, threading.Lock()
    p._executor = ThreadPoolExecutor(max_workers=1)
    p.calls = []

    def generate_sync(requests):
        p.calls.append(len(requests))
        if any(POISON in r.prompt_ids for r in requests):
            raise RuntimeError("index out of range in self")
        return [GenerationResult("ok", [1], [0.0], r.prompt_ids, "length") for r in requests]

    p.generate_sync = generate_sync
    return p


async def _one(p: LocalPolicy, ids: list[int]):
    try:
        (res,) = await p.generate([GenerationRequest(prompt_ids=ids)])
        return res.text
    except Exception as exc:  # noqa: BLE001 - the test compares what each caller got
        return exc


async def test_a_failing_request_fails_alone_and_its_batch_mates_are_served():
    p = _policy()
    got = await asyncio.gather(*(_one(p, [1, POISON if i == 2 else 3]) for i in range(5)))
    assert [g for i, g in enumerate(got) if i != 2] == ["ok"] * 4
    assert isinstance(got[2], RuntimeError) and "index out of range" in str(got[2])
    assert p.calls[0] == 5  # they were batched together, then retried one by one
    assert sorted(p.calls[1:]) == [1] * 5


@pytest.mark.parametrize("bad", [100, -1, 10**9, True])
async def test_out_of_vocabulary_prompt_ids_are_refused_before_batching(bad):
    p = _policy()
    got = await asyncio.gather(_one(p, [1, bad]), _one(p, [2, 3]))
    assert isinstance(got[0], ValueError) and "outside the vocabulary [0, 100)" in str(got[0])
    assert got[1] == "ok"
    assert p.calls == [1]  # the bad one never reached the model
