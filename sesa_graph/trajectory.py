"""The Trajectory record: what flows from the graphs to training, the store and the notebooks.

One record per proposer rollout and per solver rollout. Token-level fields (``prompt_ids``,
``completion_ids``, ``env_mask``, ``logprobs``) are what GRPO consumes; the text fields (turns, searches
as JSON) are what people read. Stored as Parquet by ``training.store``; every field maps to one column.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, Field

# the version of the Parquet schema below, written into every shard's schema metadata; bump it when a column
# changes type or meaning (a new column with a default needs no bump: older shards read with it null)
SCHEMA_VERSION = "1"
SCHEMA_KEY = b"sesa.trajectory_schema"


class Trajectory(BaseModel):
    """One rollout of one role."""

    role: Literal["proposer", "solver"] = Field(description="Which policy produced it.")
    run: str = Field("", description="Run name.")
    step: int = Field(0, description="Self-play step.")
    question_id: str = Field(description="Id of the self-play item (target) this rollout belongs to.")
    group_id: str = Field(description="GRPO group: rollouts that share a prompt.")
    sample: int = Field(0, description="Index within the group.")
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int] = Field(
        description="1 = token sampled by the policy, 0 = injected <information> text."
    )
    logprobs: list[float] = Field(description="Sampled-token log-probs (0.0 on injected tokens).")
    turns_json: str = Field(
        "[]", description="The assistant turns as JSON (text, kind, content, think, reason)."
    )
    searches_json: str = Field("[]", description="Search calls and their documents as JSON.")
    n_turns: int = 0
    n_searches: int = 0
    status: str = Field(description="answered | malformed | max_turns | max_tokens | search_error.")
    final: str | None = Field(None, description="The answer (solver) or question (proposer).")
    question: str = Field("", description="The question the solver answered (solver) or proposed (proposer).")
    target: str = Field("", description="The target answer of the self-play item (the solver's gold).")
    hops: int = 1
    skill_ids: list[str] = Field(
        default_factory=list, description="Skills in the solver's prompt (solver only)."
    )
    skill_bank_version: int | None = None
    valid: bool | None = Field(None, description="Proposer: did the question pass validation.")
    invalid_reason: str | None = None
    verdict_json: str | None = Field(None, description="Judge verdict as JSON (solver only).")
    correct: bool | None = None
    reward: float = 0.0
    success_rate: float | None = Field(None, description="Solver group success rate p of this item.")
    trainable: bool = Field(
        True, description="False for rollouts excluded from training (e.g. search_error)."
    )
    selected: bool = Field(
        True,
        description="Part of the trainer's fixed-size batch for this step (extra valid "
        "groups beyond it are kept for analysis only).",
    )
    reused: bool = Field(False, description="True when the question came from the reuse pool, not this step.")
    policy_version: int = 0

    @classmethod
    def from_state(cls, role: str, state: dict[str, Any], **fields: Any) -> Trajectory:
        return cls(
            role=role,
            prompt_ids=state["prompt_ids"],
            completion_ids=state["completion_ids"],
            env_mask=state["env_mask"],
            logprobs=state["logprobs"],
            turns_json=json.dumps(state.get("turns", [])),
            searches_json=json.dumps(state.get("searches", [])),
            n_turns=state.get("n_turns", 0),
            n_searches=len(state.get("searches", [])),
            status=state.get("status", "malformed"),
            final=state.get("final"),
            **fields,
        )

    @property
    def turns(self) -> list[dict[str, Any]]:
        return json.loads(self.turns_json)

    @property
    def searches(self) -> list[dict[str, Any]]:
        return json.loads(self.searches_json)


def _arrow_type(annotation: Any) -> Any:
    import pyarrow as pa

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return _arrow_type(inner)
    if origin is Literal:
        return pa.string()
    if origin is list:
        return pa.list_(_arrow_type(args[0]))
    return {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: pa.string()}[annotation]


def arrow_schema() -> Any:
    """The one Arrow schema of every trajectory shard, from the fields above: a column that is null in one
    shard (no proposer has a verdict) has the same type as in the next, so ``datasets.load_dataset`` and
    ``pyarrow.dataset`` read a whole run at once."""
    import pyarrow as pa

    hints = typing.get_type_hints(Trajectory)
    fields = [
        pa.field(name, _arrow_type(hints[name]), nullable=not f.is_required() or f.default is None)
        for name, f in Trajectory.model_fields.items()
    ]
    return pa.schema(fields, metadata={SCHEMA_KEY: SCHEMA_VERSION.encode()})
