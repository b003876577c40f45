"""What a trainer hands TRL for one step: ``rollout_func``'s rows from the step's trajectory shard, and what it
reports back of TRL's update.

TRL counts a completion as terminated (``completions/clipped_ratio``, ``mean_terminated_length``, and what
``mask_truncated_completions`` keeps) only when its last token is an eos id. Ours end on the protocol's stop
string (``</answer>``, ``</search>``), and the embedded tokenizer's ``eos_token`` is ``<|im_start|>``, which a
completion never holds: TRL saw every completion as cut. So a completion that ended on its own -- its last turn
stopped (not cut by a token budget) and nothing was injected after it -- gets the tokenizer's eos appended as an
end marker, with ``env_mask`` 0: it is never trained on and TRL's lengths count only ``env_mask`` 1 tokens.
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger("sesa.trainer")

# TRL's per-update numbers a step's record carries (``updates`` in metrics.jsonl) besides the loss
UPDATE_KEYS = (
    "loss",
    "grad_norm",
    "learning_rate",
    "kl",
    "entropy",
    "completions/clipped_ratio",
    "completions/mean_terminated_length",
)


def ended_on_its_own(turns_json: str, env_mask: Any, kept: int) -> bool:
    """The rollout's last turn stopped by itself (``finish`` not ``length``), no injected text follows it, and
    ``max_completion_length`` kept all of it (``kept`` tokens of ``len(env_mask)``).

    >>> ended_on_its_own('[{"finish": "stop"}]', [1, 0, 1], 3)
    True
    >>> ended_on_its_own('[{"finish": "length"}]', [1, 1], 2), ended_on_its_own('[{"finish": "stop"}]', [1, 0], 2)
    (False, False)
    """
    turns = json.loads(turns_json or "[]")
    return bool(turns and turns[-1].get("finish") != "length" and kept == len(env_mask) and env_mask[-1] == 1)


def rows_for_training(
    df: Any,
    expected: int,
    role: str,
    step: int,
    max_completion_length: int | None = None,
    end_marker: int | None = None,
) -> dict[str, list]:
    """The rollout_func output of one step's shard (selected rows, in group order). A completion longer than
    ``max_completion_length`` (injected documents count) is trained on its first that many tokens: the
    trainer's memory grows with sequence length, and TRL would cap a completion it generated itself there.
    ``end_marker``: the eos id appended (masked) to completions that ended on their own (module docstring)."""
    if "selected" in df.columns:
        df = df[df["selected"]]
    if len(df) != expected:
        raise RuntimeError(
            f"step {step}: {len(df)} {role} rollouts selected, the trainer's batch is {expected}"
        )
    cut = max_completion_length or None
    turns = df["turns_json"] if "turns_json" in df.columns else [""] * len(df)
    env_masks, completions, logprobs, truncated = [], [], [], 0
    for mask, trainable, ids, lps, turns_json in zip(
        df["env_mask"], df["trainable"], df["completion_ids"], df["logprobs"], turns
    ):
        truncated += cut is not None and len(ids) > cut
        kept = [int(x) for x in mask[:cut]]
        ended = end_marker is not None and len(mask) > 0 and ended_on_its_own(turns_json, mask, len(kept))
        env_masks.append((kept if trainable else [0] * len(kept)) + [0] * ended)  # search_error: no loss
        completions.append([int(x) for x in ids[:cut]] + ([end_marker] if ended else []))
        logprobs.append([float(x) for x in lps[:cut]] + [0.0] * ended)
    if truncated:
        log.warning(
            "step %d: %d %s completions longer than train.max_completion_length=%d were cut to it",
            step,
            truncated,
            role,
            cut,
        )
    return {
        "prompt_ids": [[int(x) for x in v] for v in df["prompt_ids"]],
        "completion_ids": completions,
        "logprobs": logprobs,
        "env_mask": env_masks,
        "reward": [float(r) for r in df["reward"]],
    }


def last_update(log_history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """TRL's last logged training numbers (``trainer.state.log_history``; logging_steps is 1), for the ready
    message: the update that made the weights about to be published. None before the first update.

    >>> last_update([{"loss": 0.5, "step": 1, "completions/clipped_ratio": 0.25, "epoch": 0.1}])
    {'loss': 0.5, 'completions/clipped_ratio': 0.25, 'global_step': 1}
    """
    for entry in reversed(log_history):
        if "loss" in entry:
            out = {k: entry[k] for k in UPDATE_KEYS if isinstance(entry.get(k), int | float)}
            return {**out, "global_step": entry.get("step")}
    return None


def update_record(log_history: list[dict[str, Any]], took_s: float | None) -> dict[str, Any] | None:
    """:func:`last_update` with what TRL does not log: ``update_s``, from the batch handed to TRL to the next
    publish (its scoring passes, updates and any checkpoint), and this rank's peak memory so far -- the host's
    resident set and, on a GPU, torch's ``max_memory_allocated``, the figure the memory plan predicts."""
    import resource

    import torch

    out = last_update(log_history)
    if out is None:
        return None
    if took_s is not None:
        out["update_s"] = round(took_s, 3)
    out["host_peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda_peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        out["cuda_peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    return out
