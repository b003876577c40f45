"""train.updates_per_step and train.proposer_advantage on TRL's real GRPO update: with two optimizer steps on
a step's batch the second one's ratio to the generating policy moves and the clip range acts ([SSP]'s
2 minibatches); with one it never does. A tiny policy, a fixed batch from rollout_func, no orchestrator."""

from pathlib import Path

import pytest

from sesa_graph.config import load_config
from tests.training.trainer_harness import tiny_policy
from training.grpo_update import grpo_trainer_class
from training.trainer import grpo_config_kwargs, passthrough_reward

TARGETS = 8


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_policy(tmp_path_factory.mktemp("tiny") / "policy", hidden=64)


def _train(model_dir: Path, out: Path, updates: int, advantage: str = "step_normalised", seen=None):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    cfg = load_config(
        overrides={
            "train.use_vllm": False,
            "train.steps": 1,
            "train.targets_per_step": TARGETS,
            "train.updates_per_step": updates,
            "train.proposer_advantage": advantage,
            "train.micro_batch_size": 4,
            "train.learning_rate": 0.01,  # one update moves the tiny policy well past the clip range
            "train.beta": 0.0,
            "train.loss_type": "dapo",
            "train.epsilon_high": 0.285,
            "train.max_completion_length": 64,
        }
    )
    tok = AutoTokenizer.from_pretrained(model_dir)
    good = tok("Mount Kilimanjaro is the highest mountain in Africa.")["input_ids"]
    bad = tok("The Danube flows through ten countries.")["input_ids"]
    rewards = [1.0 if i % 2 == 0 else 0.0 for i in range(TARGETS)]

    def rollout_func(prompts, trainer):
        ids = [good if r else bad for r in rewards]
        return {
            "prompt_ids": [tok("Write a question:")["input_ids"]] * len(prompts),
            "completion_ids": ids,
            "logprobs": [[0.0] * len(c) for c in ids],
            "env_mask": [[1] * len(c) for c in ids],
            "reward": rewards[: len(prompts)],
        }

    kwargs = grpo_config_kwargs(cfg, "proposer", out)
    kwargs.update(report_to=[], save_strategy="no")
    kind = grpo_trainer_class(advantage == "raw")

    class Recording(kind):
        def _generate_and_score_completions(self, inputs):
            result = super()._generate_and_score_completions(inputs)
            if seen is not None:
                seen.extend(result["advantages"].tolist())
            return result

    torch.manual_seed(0)
    trainer = Recording(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=[passthrough_reward],
        args=GRPOConfig(**kwargs),
        train_dataset=Dataset.from_dict({"prompt": ["proposer self-play"] * TARGETS}),
        processing_class=tok,
        rollout_func=rollout_func,
    )
    trainer.train()
    return [h for h in trainer.state.log_history if "clip_ratio/region_mean" in h]


def test_two_updates_a_step_let_the_clip_act_and_one_does_not(model_dir, tmp_path):
    two = _train(model_dir, tmp_path / "two", updates=2)
    assert len(two) == 2  # two optimizer steps on the one self-play step's batch
    assert two[0]["clip_ratio/region_mean"] == 0  # the first update: the policy that generated
    assert two[1]["clip_ratio/region_mean"] > 0
    one = _train(model_dir, tmp_path / "one", updates=1)
    assert len(one) == 1 and one[0]["clip_ratio/region_mean"] == 0


def test_raw_proposer_advantage_is_the_reward(model_dir, tmp_path):
    seen: list[float] = []
    _train(model_dir, tmp_path / "raw", updates=1, advantage="raw", seen=seen)
    assert seen == [1.0 if i % 2 == 0 else 0.0 for i in range(TARGETS)]
    normalised: list[float] = []
    _train(model_dir, tmp_path / "norm", updates=1, seen=normalised)
    assert normalised[0] > 0 > normalised[1] and abs(sum(normalised)) < 1e-4  # around the step's mean


def test_updates_per_step_splits_the_batch_and_scales_trls_step_counts():
    cfg = load_config(
        overrides={
            "train.use_vllm": False,
            "train.targets_per_step": 8,
            "train.updates_per_step": 2,
            "train.micro_batch_size": 2,
            "train.steps": 10,
            "train.warmup_steps": 5,
            "train.save_every": 5,
        }
    )
    k = grpo_config_kwargs(cfg, "proposer", Path("/tmp/x"))
    assert (k["per_device_train_batch_size"], k["gradient_accumulation_steps"]) == (2, 2)
    assert k["steps_per_generation"] == 4  # one generation = the whole step's 8 rollouts
    assert (k["max_steps"], k["warmup_steps"], k["save_steps"]) == (20, 10, 10)


def test_updates_that_do_not_divide_a_ranks_batch_are_refused():
    with pytest.raises(ValueError, match="updates_per_step 3 does not divide"):
        load_config(overrides={"train.targets_per_step": 4, "train.updates_per_step": 3})
