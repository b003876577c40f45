"""The GRPO update's one departure from TRL's: the proposer's advantage may be its raw reward.

TRL takes every advantage as (reward - group mean) / group std. The proposer writes one proposal per target,
so its group is the whole step (``num_generations = targets_per_step``) and the step's mean is its baseline.
[SSP]'s proposer (n = 1) gets its reward as the advantage instead: verl's GRPO gives a group of one mean 0
and std 1. ``train.proposer_advantage: raw`` does that here.
"""

from __future__ import annotations

from typing import Any


def grpo_trainer_class(raw_advantage: bool) -> Any:
    """TRL's ``GRPOTrainer``, or with ``raw_advantage`` a subclass whose advantages are the rewards themselves."""
    from trl import GRPOTrainer

    if not raw_advantage:
        return GRPOTrainer

    class RawAdvantageGRPOTrainer(GRPOTrainer):
        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            out = super()._generate_and_score_completions(inputs)
            if self.model.training:
                # rollout_func's ``reward`` field, merged into this rank's inputs in their order
                out["advantages"] = raw_advantages(inputs, out["advantages"])
            return out

    return RawAdvantageGRPOTrainer


def raw_advantages(inputs: list[dict[str, Any]], like: Any) -> Any:
    """This rank's rewards as an advantage tensor shaped, typed and placed as ``like``.

    >>> import torch
    >>> raw_advantages([{"reward": -1.0}, {"reward": 0.25}], torch.zeros(2)).tolist()
    [-1.0, 0.25]
    """
    import torch

    rewards = [float(row["reward"]) for row in inputs]
    if len(rewards) != len(like):
        raise RuntimeError(f"{len(rewards)} rewards for {len(like)} advantages")
    return torch.tensor(rewards, dtype=like.dtype, device=like.device)
