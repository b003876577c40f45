"""Typed LangGraph state of one rollout (solver or proposer) and of one self-play item.

Rollout state holds only data; the policy client, search backend and settings travel in the run-time
context (:class:`sesa_graph.rollout.loop.RolloutContext`), so a state is always serializable.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

# not typing.TypedDict: pydantic (LangGraph's input/output JSON schemas, hence Studio's forms) rejects it on
# Python < 3.12
from typing_extensions import TypedDict

RolloutStatus = Literal["running", "answered", "malformed", "max_turns", "max_tokens", "search_error"]
"""How a rollout ended: ``max_turns`` when its turn limit ran out, ``max_tokens`` when its token budget
(``max_total_tokens``) did, before it took its terminal action."""


class RolloutState(TypedDict, total=False):
    """One multi-turn rollout, grown turn by turn (docs/PROTOCOL.md)."""

    prompt_ids: list[int]
    """Chat-templated prompt (system + user) the policy continues."""
    completion_ids: list[int]
    """Everything after the prompt: sampled tokens and injected <information> tokens, in order."""
    env_mask: list[int]
    """Per completion token: 1 = sampled by the policy, 0 = injected by the environment."""
    logprobs: list[float]
    """Per completion token: log-prob of the sampled token (0.0 on injected tokens)."""
    turns: list[dict[str, Any]]
    """Per assistant turn: text, kind (search|answer|question|invalid), content, think, reason, finish."""
    searches: list[dict[str, Any]]
    """Per search call: query and the returned docs (id, title, text, score)."""
    n_turns: int
    """Assistant turns taken so far."""
    final_turn: bool
    """True once turns ran out (or the token budget has no room for another search): the next generation is
    the last, and may not search."""
    status: RolloutStatus
    """How the rollout ended (``running`` while it goes on)."""
    final: str | None
    """The solver's answer or the proposer's question, when one was given."""
    error: str | None
    """Why a rollout ended in ``search_error``."""


class SolveInput(TypedDict, total=False):
    """Input of the solve graph."""

    question: str
    skills_block: str | None
    """Rendered skills for the prompt (solver only; empty or None for none)."""


class SolveState(RolloutState, SolveInput):
    """State of the solve graph: a solver rollout of one question."""


class ProposeInput(TypedDict, total=False):
    """Input of the propose graph. The proposer has no skills field: it can never see the bank."""

    target: str
    hops: int
    examples: str | None
    """Example questions from the target's pool row (SSP's sys_question_example), shown in the prompt."""


class ProposeState(RolloutState, ProposeInput):
    """State of the propose graph, plus the outcome of validation."""

    valid: bool
    invalid_reason: str | None
    rag_answer: str | None
    """What the judge answered from the proposer's evidence + distractors (retrieval-augmented check)."""


class SelfPlayItem(TypedDict, total=False):
    """State of one self-play item: a target, its proposal, and the solver group on the proposed question."""

    item_id: str
    target: str
    hops: int
    examples: str | None
    """Example questions from the target's pool row (SSP's sys_question_example), shown to the proposer."""
    reuse_question: str | None
    """Set for a question reused from an earlier step to fill the solver batch (no proposal is made)."""
    proposal: dict[str, Any]
    """The finished ProposeState."""
    skill_ids: list[str]
    """The skills shown in the solver prompt (those the render budget kept): the ones credited."""
    skills_block: str | None
    skill_similarity: float | None
    """Best cosine similarity between the question and a shown skill (None: none shown, or placebo)."""
    rollouts: Annotated[list[dict[str, Any]], operator.add]
    """Finished SolveStates of the group, each with its ``sample`` index (filled by the fan-out)."""
    verdicts: list[dict[str, Any]]
    success_rate: float | None
    proposer_reward: float
    solver_rewards: list[float]
