"""Integration tests of the local policy on the real embedded model."""

import asyncio
import logging

import pytest

from sesa_graph.policy import GenerationRequest, SamplingParams

pytestmark = pytest.mark.slow


def _req(content: str, **sp) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": content}], sampling=SamplingParams(**sp))


def test_answers_a_question_from_a_passage(local_policy):
    passage = "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France."
    (res,) = asyncio.run(
        local_policy.generate(
            [_req(f"{passage}\nIn which city is the Eiffel Tower?", max_tokens=24, temperature=0)]
        )
    )
    assert "Paris" in res.text


def test_stop_strings_cut_text_and_ids_consistently(local_policy):
    (res,) = asyncio.run(
        local_policy.generate(
            [_req("Count from 1 to 20, separated by commas.", max_tokens=40, temperature=0, stop=("5.",))]
        )
    )
    assert res.finish_reason == "stop" and res.stop_string == "5."
    assert res.text == local_policy.tokenizer.decode(res.token_ids, skip_special_tokens=True)
    assert res.text.endswith("5.")
    assert len(res.logprobs) == len(res.token_ids)
    assert all(lp <= 0 for lp in res.logprobs)


def test_concurrent_requests_share_one_batch(local_policy):
    before = dict(local_policy.stats)

    async def many():
        reqs = [_req(f"Name a colour number {i}.", max_tokens=6, temperature=1.0, seed=1) for i in range(4)]
        return await asyncio.gather(*(local_policy.generate([r]) for r in reqs))

    outs = asyncio.run(many())
    assert len(outs) == 4 and all(len(o[0].token_ids) > 0 for o in outs)
    assert local_policy.stats["batches"] - before["batches"] == 1
    assert local_policy.stats["requests"] - before["requests"] == 4


def test_greedy_logprobs_are_the_argmax(local_policy):
    import torch

    (res,) = asyncio.run(local_policy.generate([_req("Say hello.", max_tokens=5, temperature=0)]))
    ids = torch.tensor([res.prompt_ids + res.token_ids])
    with torch.inference_mode():
        logits = local_policy.model(ids).logits[0, len(res.prompt_ids) - 1 : -1]
    best = torch.log_softmax(logits.float(), -1).max(-1)
    assert best.indices.tolist() == res.token_ids
    assert best.values.tolist() == pytest.approx(res.logprobs, abs=1e-3)


def test_over_long_request_is_clamped_with_a_warning(local_policy, caplog):
    old = local_policy.max_context
    local_policy.max_context = 40
    try:
        with caplog.at_level(logging.WARNING):
            (res,) = asyncio.run(local_policy.generate([_req("Hi", max_tokens=500, temperature=0)]))
    finally:
        local_policy.max_context = old
    assert "clamped" in caplog.text
    assert len(res.prompt_ids) + len(res.token_ids) <= 40


def test_reload_weights_changes_outputs(local_policy, tmp_path):
    import torch
    from safetensors.torch import save_file

    state = {k: v.clone() for k, v in local_policy.model.state_dict().items() if "lm_head" not in k}
    original = {k: v.clone() for k, v in state.items()}
    req = _req("Tell me about cats.", max_tokens=8, temperature=0)
    (before,) = asyncio.run(local_policy.generate([req]))
    state["model.norm.weight"] = state["model.norm.weight"] * -1.0
    save_file(state, str(tmp_path / "model.safetensors"))
    v = local_policy.version
    local_policy.reload(tmp_path)
    try:
        (after,) = asyncio.run(local_policy.generate([req]))
        assert local_policy.version == v + 1
        assert after.token_ids != before.token_ids
    finally:
        save_file(original, str(tmp_path / "model.safetensors"))
        local_policy.reload(tmp_path)
    with pytest.raises(FileNotFoundError):
        local_policy.reload(tmp_path / "missing")
    assert torch.equal(local_policy.model.model.norm.weight, original["model.norm.weight"])


def test_reused_states_give_the_same_multi_turn_rollouts(local_policy):
    """Rollouts whose turns reuse cached states generate exactly what full re-reads generate."""
    from sesa_graph.policy.local import LocalPolicy

    fresh = LocalPolicy("embedded", batch_wait_ms=20, kv_cache_mb=0)
    sp = SamplingParams(max_tokens=12, temperature=0)

    async def rollout(policy, question):
        ids = policy.encode_messages([{"role": "user", "content": question}])
        out = []
        for turn in range(3):
            (r,) = await policy.generate([GenerationRequest(prompt_ids=ids, sampling=sp)])
            out.append(r.token_ids)
            ids = (
                ids + r.token_ids + policy.encode_text(f"\nObservation {turn}: more about {question[:12]}\n")
            )
        return out

    async def group(policy):
        return await asyncio.gather(
            *(rollout(policy, q) for q in ["Who wrote Hamlet?", "Name three rivers in Africa please."])
        )

    before = dict(local_policy.kv_cache.stats)
    assert asyncio.run(group(local_policy)) == asyncio.run(group(fresh))
    assert local_policy.kv_cache.stats["reused_tokens"] > before["reused_tokens"]
    assert fresh.kv_cache.stats["reused_tokens"] == 0
