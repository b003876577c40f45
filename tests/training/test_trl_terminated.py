"""TRL's completion metrics on what the trainers hand it: a completion that ended on the protocol's stop counts
as terminated (``completions/clipped_ratio`` below 1), one cut by a token budget as clipped, on a real GRPO
update of a tiny policy with the embedded tokenizer (whose eos is a token no completion ends on)."""

import json
from pathlib import Path

import pandas as pd
import pytest

from sesa_graph.config import load_config
from tests.training.trainer_harness import tiny_policy
from training.trainer import grpo_config_kwargs, passthrough_reward
from training.trainer_rows import last_update, rows_for_training

TARGETS = 4


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_policy(tmp_path_factory.mktemp("tiny") / "policy", hidden=64)


def _shard(tok) -> pd.DataFrame:
    """Two rollouts that answered (the last turn stopped on </answer>), one whose turn hit max_tokens and one
    that ended on injected documents (the token budget left no room for another turn)."""
    answer = tok("<think>so</think> <answer>Paris</answer>")["input_ids"]
    docs = tok("<information>Doc 1: Paris is the capital.</information>")["input_ids"]
    rows = [
        (answer, [1] * len(answer), [{"finish": "stop"}]),
        (answer, [1] * len(answer), [{"finish": "stop"}]),
        (answer[:5], [1] * 5, [{"finish": "length"}]),
        (answer + docs, [1] * len(answer) + [0] * len(docs), [{"finish": "stop"}]),
    ]
    return pd.DataFrame(
        {
            "prompt_ids": [tok("Who?")["input_ids"]] * len(rows),
            "completion_ids": [ids for ids, _, _ in rows],
            "env_mask": [mask for _, mask, _ in rows],
            "logprobs": [[0.0] * len(ids) for ids, _, _ in rows],
            "turns_json": [json.dumps(t) for _, _, t in rows],
            "trainable": [True] * len(rows),
            "reward": [1.0, 0.0, 0.0, 1.0],
        }
    )


def test_only_completions_that_ended_on_their_own_get_the_masked_end_marker(model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    shard = _shard(tok)
    plain = rows_for_training(shard, TARGETS, "solver", 0)
    marked = rows_for_training(shard, TARGETS, "solver", 0, end_marker=tok.eos_token_id)
    for i in range(TARGETS):
        grew = len(marked["completion_ids"][i]) - len(plain["completion_ids"][i])
        assert grew == (1 if i < 2 else 0), i
        assert len(marked["completion_ids"][i]) == len(marked["env_mask"][i]) == len(marked["logprobs"][i])
    assert marked["completion_ids"][0][-1] == tok.eos_token_id and marked["env_mask"][0][-1] == 0  # no loss
    cut = rows_for_training(shard, TARGETS, "solver", 0, max_completion_length=4, end_marker=tok.eos_token_id)
    assert all(len(c) == 4 for c in cut["completion_ids"])  # cut by max_completion_length: not ended


def _clipped_ratio(model_dir: Path, out: Path, end_marker: bool) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    cfg = load_config(
        overrides={
            "train.use_vllm": False,
            "train.steps": 1,
            "train.targets_per_step": TARGETS,
            "train.micro_batch_size": TARGETS,
            "train.max_completion_length": 64,
        }
    )
    tok = AutoTokenizer.from_pretrained(model_dir)
    shard = _shard(tok)

    def rollout_func(prompts, trainer):
        return rows_for_training(
            shard, len(prompts), "proposer", 0, 64, tok.eos_token_id if end_marker else None
        )

    kwargs = grpo_config_kwargs(cfg, "proposer", out)
    kwargs.update(report_to=[], save_strategy="no")
    torch.manual_seed(0)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=[passthrough_reward],
        args=GRPOConfig(**kwargs),
        train_dataset=Dataset.from_dict({"prompt": ["proposer self-play"] * TARGETS}),
        processing_class=tok,
        rollout_func=rollout_func,
    )
    trainer.train()
    update = last_update(trainer.state.log_history)
    assert update is not None and update["global_step"] == 1 and "loss" in update
    return update


def test_a_real_update_counts_stopped_completions_as_terminated(model_dir, tmp_path):
    # without the marker TRL logged clipped_ratio 1.0 here (every step of every run: "all truncated")
    after = _clipped_ratio(model_dir, tmp_path / "after", end_marker=True)
    assert after["completions/clipped_ratio"] == 0.5  # the two answered rollouts ended; two were cut
    from transformers import AutoTokenizer

    answered = _shard(AutoTokenizer.from_pretrained(model_dir))["completion_ids"][0]
    assert after["completions/mean_terminated_length"] == len(answered)  # the marker is not counted
