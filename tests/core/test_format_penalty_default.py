"""The invalid-proposal reward follows the proposer reward unless set: -1 under frontier shaping (SESA's
deviation), SSP's 0 under 1-p (the SSP-style arm, `--proposer-reward 1-p`)."""

from pathlib import Path

import pytest

from sesa_graph.config import RewardConfig, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("reward", "penalty"), [("frontier", -1.0), ("intermediate", -1.0), ("one_minus_p", 0.0)]
)
def test_unset_penalty_follows_the_reward(reward, penalty):
    assert RewardConfig(proposer=reward).format_penalty == penalty


def test_a_set_penalty_is_kept_and_the_gpu_ssp_arm_gets_ssps_zero():
    assert RewardConfig(proposer="one_minus_p", format_penalty=-1.0).format_penalty == -1.0
    gpu = ROOT / "configs" / "qwen3-4b-8xa100.yaml"
    assert load_config(gpu).rewards.format_penalty == -1.0  # SESA: the named deviation
    ssp = load_config(gpu, overrides={"rewards.proposer": "one_minus_p", "memory.mode": "off"})
    assert ssp.rewards.format_penalty == 0.0 and not ssp.proposer.force_final_question
    cpu_ssp = load_config(
        None, overrides={"rewards.proposer": "one_minus_p"}
    )  # tiny-cpu.yaml leaves it unset
    assert cpu_ssp.rewards.format_penalty == 0.0 and load_config(None).rewards.format_penalty == -1.0
