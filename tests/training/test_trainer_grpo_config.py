"""The trainer's GRPOConfig arguments: the SSP knobs reach TRL (built here, no training started)."""

from pathlib import Path

import pytest

from sesa_graph.config import load_config
from training.trainer import grpo_config_kwargs


def _grpo(overrides, role="solver"):
    from trl import GRPOConfig

    cfg = load_config(overrides={"train.use_vllm": False, **overrides})
    return GRPOConfig(**grpo_config_kwargs(cfg, role, Path("/tmp/sesa-grpo-test")))


@pytest.mark.parametrize("role", ["solver", "proposer"])
def test_ssp_knobs_reach_grpo_config(role):
    g = _grpo(
        {
            "train.epsilon_high": 0.28,
            "train.lr_scheduler": "constant_with_warmup",
            "train.warmup_steps": 5,
            "train.beta": 0.0,
            "train.loss_type": "dapo",
        },
        role,
    )
    assert g.epsilon_high == 0.28
    assert str(getattr(g.lr_scheduler_type, "value", g.lr_scheduler_type)) == "constant_with_warmup"
    assert g.warmup_steps == 5 and g.beta == 0.0 and g.loss_type == "dapo"


def test_epsilon_high_none_keeps_trls_symmetric_clip():
    cfg = load_config(overrides={"train.use_vllm": False, "train.epsilon_high": None})
    assert "epsilon_high" not in grpo_config_kwargs(cfg, "solver", Path("/tmp/x"))
    g = _grpo({"train.epsilon_high": None})
    assert g.epsilon_high is None  # TRL then clips above at 1 + epsilon, as below
