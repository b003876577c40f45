"""The settings whose values come from the SESA paper or from SSP's released training script, in one table.

``sesa config show`` marks each resolved value that has a reference here: equal to it, or a deviation (with
the reason from :data:`DEVIATIONS` when the project or a config chooses otherwise on purpose). The GPU
configs follow every reference value except the listed deviations (checked by a test).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Reference(NamedTuple):
    value: Any
    source: str  # "paper" (SESA) or "SSP" (Search Self-Play's training script)
    note: str = ""


REFERENCES: dict[str, Reference] = {
    # the trained policies' chat template and response caps
    "solver_policy.chat_template_kwargs.enable_thinking": Reference(
        False, "SSP", "SSP renders with its own chat template, which has no thinking mode"
    ),
    "proposer_policy.chat_template_kwargs.enable_thinking": Reference(
        False, "SSP", "SSP renders with its own chat template, which has no thinking mode"
    ),
    "solver.max_total_tokens": Reference(8192, "SSP", "response tokens (max_response_length)"),
    "solver.max_tokens_per_turn": Reference(
        8192, "SSP", "no per-turn cap: a turn may use the whole response"
    ),
    "proposer.max_tokens_per_turn": Reference(
        8192, "SSP", "no per-turn cap: a turn may use the whole response"
    ),
    "train.max_completion_length": Reference(8192, "SSP", "response tokens the update scores"),
    # the solver loop and its group
    "solver.max_turns": Reference(10, "paper", "at most 10 assistant turns, the last chance included"),
    "solver.group_size": Reference(5, "paper", "G = 5 rollouts a question"),
    # the proposer (the paper leaves its loop to SSP)
    "proposer.max_turns": Reference(10, "SSP"),
    "proposer.max_total_tokens": Reference(8192, "SSP", "response tokens"),
    "proposer.min_words": Reference(10, "SSP", "shortest valid question"),
    "proposer.rag_check": Reference(True, "paper", "RAG verification of each proposal"),
    "proposer.rag_distractors": Reference(4, "paper"),
    "proposer.force_final_question": Reference(False, "SSP", "the proposer closes its <question> itself"),
    "proposer.max_chars": Reference(1000, "SSP", "longest valid question, in characters"),
    "proposer.max_words": Reference(None, "SSP", "no word cap"),
    "proposer.search_rule": Reference("ssp", "SSP", "two or more searches, none repeated, at any hop count"),
    "proposer.rag_evidence_docs": Reference(None, "SSP", "the reader gets all the proposer's evidence"),
    "proposer.rag_model_match": Reference(True, "SSP", "RAG answer: exact match, then an LLM judge"),
    # rewards
    "rewards.proposer": Reference("frontier", "paper", "frontier shaping -lambda / 4(l+p)(h-p)"),
    "rewards.format_penalty": Reference(0.0, "SSP", "reward of an invalid proposal"),
    # the training targets
    "train.target_pool": Reference(
        "runs/targets/train_answers_random_hop_50000_proposer.jsonl",
        "SSP",
        "SSP's released ~50k answers, each with its own hop count and example questions, drawn in shuffled epochs",
    ),
    # the skill memory
    "memory.mode": Reference("on", "paper", "the evolving skill bank"),
    "memory.embedder": Reference("intfloat/e5-base-v2", "paper"),
    "memory.top_k": Reference(3, "paper"),
    "memory.similarity_floor": Reference(None, "paper", "always the top 3: no similarity floor"),
    "memory.failure_source": Reference("frontier", "paper", "informative frontier failures are queued"),
    "memory.queue_cap": Reference(300, "paper"),
    "memory.consolidate_every": Reference(10, "paper"),
    "memory.consolidate_min_pending": Reference(20, "paper", "pending failures (failed rollouts)"),
    "memory.max_distill_per_pass": Reference(30, "paper"),
    "memory.admit_max_cosine": Reference(0.93, "paper"),
    "memory.evict_min_retrieved": Reference(3, "paper"),
    "memory.evict_below_score": Reference(0, "paper"),
    "memory.bank_cap": Reference(800, "paper"),
    # GRPO (the paper names GRPO; SSP's script sets the rest)
    # precision: SSP's script leaves verl's defaults (fp32 master weights, bf16 FSDP compute, bf16 rollouts)
    "train.param_dtype": Reference("float32", "SSP", "verl's fp32 master weights"),
    "train.compute_dtype": Reference("bfloat16", "SSP", "verl's FSDP mixed precision"),
    "solver_policy.dtype": Reference("bfloat16", "SSP", "rollout engine dtype"),
    "proposer_policy.dtype": Reference("bfloat16", "SSP", "rollout engine dtype"),
    "train.learning_rate": Reference(1e-6, "SSP"),
    "train.beta": Reference(0.01, "SSP", "KL coefficient"),
    "train.loss_type": Reference("dapo", "SSP", "token-mean loss aggregation"),
    "train.epsilon_high": Reference(0.285, "SSP", "clip-higher"),
    "train.lr_scheduler": Reference("constant_with_warmup", "SSP"),
    "train.warmup_steps": Reference(5, "SSP"),
    "train.save_every": Reference(5, "SSP", "a checkpoint every 5 steps (verl's save_freq in SSP's script)"),
    "train.updates_per_step": Reference(
        2, "SSP", "train batch 256, PPO minibatch 128: two optimizer steps a step"
    ),
    "train.proposer_advantage": Reference("raw", "SSP", "proposer n = 1: verl's GRPO gives it its reward"),
    "train.targets_per_step": Reference(
        256, "SSP", "train_batch_size: 256 proposals a step (proposer n = 1)"
    ),
    "train.questions_per_step": Reference(
        256, "SSP", "train_batch_size: 256 questions a step, 5 rollouts each"
    ),
    "train.steps": Reference(1950, "SSP", "10 epochs (total_epochs) of its ~50k-answer pool at 256 a step"),
}

# Where the GPU configs (and the project) knowingly differ from a reference value, and why.
_TURN_CAP = (
    "SSP caps only the whole response. The rollout loop makes a turn the last one once the budget left cannot "
    "hold two more turns of this size and an observation (so a rollout out of tokens still gets its last "
    "chance): at 8192 every turn after the first search would be the last. 1024 leaves room for three searches "
    "of 3 x 1200-char documents and a final turn within 8192, and is about twice a non-thinking Qwen3 turn "
    "(the step's turns_cut_by_turn_cap counts the turns it cuts)."
)
_BATCH = (
    "SSP's 256 a step (x 5 solver rollouts of up to 8192 tokens) is 4-8x the rollouts and trainer work of a "
    "step these GPUs hold in a reasonable step time; smaller batches, same learning rate and 2 updates a step. "
    "Not measured on a GPU."
)
DEVIATIONS: dict[str, str] = {
    "solver.max_tokens_per_turn": _TURN_CAP,
    "proposer.max_tokens_per_turn": _TURN_CAP,
    "train.targets_per_step": _BATCH,
    "train.questions_per_step": _BATCH,
    "train.steps": "a GPU-budget choice: 200 steps (64 targets a step on 8 A100s: about a quarter of one epoch "
    "of SSP's pool); SSP's script runs 10 epochs. Raise train.steps for SSP's length.",
    "rewards.format_penalty": "SSP gives an invalid proposal 0. Under frontier shaping that would rank it above a "
    "trivial or impossible question (-lambda); -1 keeps invalid < degenerate < frontier. Under SSP's 1-p reward "
    "(the SSP-style arm, 'w/o frontier shaping') the unset default is SSP's 0.",
}

# Reference choices no config field expresses; printed with the deviations.
UNSUPPORTED: dict[str, str] = {
    "one shared policy for proposer and solver (SSP)": "SESA trains two parameter sets; the SSP-style arm here "
    "keeps two (bank off, 1-p reward), so it isolates the bank and the reward, not parameter sharing.",
    "strong fixed distiller (paper: DeepSeek-v4-pro)": "the GPU configs serve a local instruct model on a spare "
    "GPU; point `models` at an API with `api: chat` to match the paper.",
}


class Arm(NamedTuple):
    """A comparison arm: what it sets on top of a config, and the reference it answers to instead of SESA."""

    settings: dict[str, Any]
    references: dict[str, Reference]
    command: str


# The arms whose reference is another method. The SSP-style arm answers to SSP itself: no skill memory and
# SSP's adversarial 1-p reward; everything else (the GRPO update, caps, batch) keeps SSP's values above.
ARMS: dict[str, Arm] = {
    "ssp": Arm(
        settings={"memory.mode": "off", "rewards.proposer": "one_minus_p"},
        references={
            "memory.mode": Reference("off", "SSP", "no skill memory"),
            "rewards.proposer": Reference(
                "one_minus_p", "SSP", "adversarial reward: the solver's failure rate"
            ),
            "rewards.format_penalty": Reference(0.0, "SSP", "reward of an invalid proposal"),
        },
        command="sesa train --bank off --proposer-reward 1-p",
    ),
}


def references(arm: str | None = None) -> dict[str, Reference]:
    """The reference table, with an arm's own references in place of SESA's where it has them."""
    return {**REFERENCES, **(ARMS[arm].references if arm else {})}


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> leaf value of a nested dict (lists and empty dicts are leaves)."""
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): obj}


def origin(key: str, value: Any, arm: str | None = None) -> str:
    """'' for a setting without a reference, else e.g. '[paper]' or '[SSP 0.01; deviation: ...]' (against
    ``arm``'s references when given)."""
    ref = references(arm).get(key)
    if ref is None:
        return ""
    if value == ref.value:
        return f"[{ref.source}]"
    why = DEVIATIONS.get(key, "not the reference value")
    return f"[{ref.source} {ref.value!r}; deviation: {why}]"
