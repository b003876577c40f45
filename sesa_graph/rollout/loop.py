"""The multi-turn generate -> search -> observe loop shared by the solver and the proposer.

One assistant turn is one policy call that continues the rollout's token ids until an action closes.
Injected text (search results, notices) is appended as tokens with ``env_mask = 0`` so GRPO never
trains on it. Model output never raises: an invalid turn gets a notice telling the policy how to use the
tags, and a rollout that ends without its terminal action is ``malformed``, ``max_turns`` (turn limit) or
``max_tokens`` (token budget, ``max_total_tokens``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Literal

from sesa_graph import prompts, protocol
from sesa_graph.config import ProposerConfig, SolverConfig
from sesa_graph.policy import GenerationRequest, PolicyClient, SamplingParams
from sesa_graph.state import RolloutState
from tools.backends import SearchBackend
from tools.corpus import Doc
from tools.errors import ServiceError
from tools.render import render_docs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopSpec:
    """Role-specific settings of the loop."""

    role: Literal["solver", "proposer"]
    stops: tuple[str, ...]
    allowed: tuple[str, ...]
    terminal: Literal["answer", "question"]
    invalid_notice: str
    final_notice: str
    max_turns: int = 10
    max_tokens_per_turn: int = 160
    max_total_tokens: int = 2048
    temperature: float = 1.0
    top_p: float = 1.0
    search_k: int = 3
    doc_chars: int = 400
    search_retries: int = 2
    # Open the terminal tag for the policy on its last turn (injected, env_mask 0), so a rollout that ran
    # out of turns still ends in a question/answer the checks can judge instead of a format failure.
    force_final_action: bool = False


@dataclass
class RolloutContext:
    """Run-time context of a rollout graph: the things a state must not hold."""

    policy: PolicyClient
    search: SearchBackend
    spec: LoopSpec
    seed: int | None = None


def initial_state(prompt_ids: list[int]) -> RolloutState:
    return RolloutState(
        prompt_ids=prompt_ids,
        completion_ids=[],
        env_mask=[],
        logprobs=[],
        turns=[],
        searches=[],
        n_turns=0,
        final_turn=False,
        status="running",
        final=None,
        error=None,
    )


def _inject(state: RolloutState, ctx: RolloutContext, text: str) -> dict[str, Any]:
    ids = ctx.policy.encode_text(text)
    return {
        "completion_ids": state["completion_ids"] + ids,
        "env_mask": state["env_mask"] + [0] * len(ids),
        "logprobs": state["logprobs"] + [0.0] * len(ids),
    }


async def generate_turn(state: RolloutState, ctx: RolloutContext) -> tuple[dict[str, Any], str]:
    """One assistant turn. Returns the state update and where to go: ``search``, ``agent`` or ``end``."""
    spec = ctx.spec
    room = spec.max_total_tokens - len(state["completion_ids"])
    if room <= 0:
        return {"status": "max_tokens"}, "end"
    sampling = SamplingParams(
        max_tokens=min(spec.max_tokens_per_turn, room),
        temperature=spec.temperature,
        top_p=spec.top_p,
        stop=spec.stops,
        seed=ctx.seed,
    )
    (res,) = await ctx.policy.generate(
        [GenerationRequest(prompt_ids=state["prompt_ids"] + state["completion_ids"], sampling=sampling)]
    )
    forced = _final_prefix(spec, state)  # the opening tag the environment wrote before this turn, if any
    turn = protocol.parse_turn(forced + res.text, allowed=spec.allowed)
    if (
        forced
        and turn.kind == "invalid"
        and (raw := protocol.parse_turn(res.text, allowed=spec.allowed)).kind == "search"
    ):
        turn = raw  # it searched with no searches left: ends as a search on the last turn does
    n_turns = state["n_turns"] + 1
    update: dict[str, Any] = {
        "completion_ids": state["completion_ids"] + res.token_ids,
        "env_mask": state["env_mask"] + [1] * len(res.token_ids),
        "logprobs": state["logprobs"] + res.logprobs,
        "n_turns": n_turns,
        "turns": state["turns"]
        + [
            {
                "text": forced + res.text,
                "kind": turn.kind,
                "content": turn.content,
                "think": turn.think,
                "reason": turn.reason,
                "finish": res.finish_reason,
                # stopped by max_tokens_per_turn itself, not by the rollout's remaining max_total_tokens
                "turn_cap_cut": res.finish_reason == "length"
                and len(res.token_ids) >= spec.max_tokens_per_turn,
            }
        ],
    }
    if turn.kind == spec.terminal:
        return {**update, "status": "answered", "final": turn.content}, "end"
    if state["final_turn"] or n_turns >= spec.max_turns:
        # the last chance was used without the terminal action; max_turns counts every generation, the last
        # chance included ([paper]: at most 10 assistant turns), so no turn follows the max_turns-th
        status = _out_of_budget(n_turns, spec) if turn.kind == "search" else "malformed"
        return {**update, "status": status}, "end"
    if turn.kind == "search":
        return update, "search"
    notice = spec.invalid_notice
    if n_turns + 1 >= spec.max_turns:  # the next turn is the last one
        notice, update["final_turn"] = f"{notice}\n{spec.final_notice}", True
    merged = {**state, **update}
    text = protocol.render_notice(notice) + _final_prefix(spec, merged)
    return {**update, **_inject(merged, ctx, text)}, "agent"


def turn_cap_cuts(turn_lists: list[list[dict[str, Any]]]) -> int:
    """Turns that max_tokens_per_turn cut (the step's ``turns_cut_by_turn_cap``): each was parsed unfinished.

    >>> turn_cap_cuts([[{"turn_cap_cut": True}, {"finish": "stop"}], [{"turn_cap_cut": False}]])
    1
    """
    return sum(bool(t.get("turn_cap_cut")) for turns in turn_lists for t in turns)


def _out_of_budget(n_turns: int, spec: LoopSpec) -> str:
    """Why the last turn (the ``n_turns``-th) was the last: ``max_turns`` when the turn limit was reached, else
    ``max_tokens`` (the token budget had no room for another search, see :func:`_no_room_for_another_search`)."""
    return "max_turns" if n_turns >= spec.max_turns else "max_tokens"


def _final_prefix(spec: LoopSpec, state: dict[str, Any]) -> str:
    return protocol.open_tag(spec.terminal) if state.get("final_turn") and spec.force_final_action else ""


async def run_search(state: RolloutState, ctx: RolloutContext) -> tuple[dict[str, Any], str]:
    """Run the last turn's query and inject the results. Returns the update and ``agent`` or ``end``."""
    spec = ctx.spec
    query = state["turns"][-1]["content"]
    docs: list[Doc] | None = None
    error = ""
    for attempt in range(spec.search_retries + 1):
        try:
            (docs,) = await asyncio.to_thread(ctx.search.search, [query], spec.search_k)
            break
        except ServiceError as exc:  # an http backend that already spent its own retries and deadline
            error = f"{type(exc).__name__}: {exc}"
            log.warning("search failed: %s", error)
            break
        except Exception as exc:  # noqa: BLE001 - any backend failure: retried, then the rollout ends search_error
            error = f"{type(exc).__name__}: {exc}"
            log.warning("search failed (attempt %d): %s", attempt + 1, error)
            await asyncio.sleep(0.2 * 2**attempt)
    if docs is None:
        return {"status": "search_error", "error": error}, "end"
    docs = [Doc(d.id, d.title, d.text[: spec.doc_chars], d.score) for d in docs]
    record = {
        "query": query,
        "docs": [{"id": d.id, "title": d.title, "text": d.text, "score": d.score} for d in docs],
    }
    update: dict[str, Any] = {"searches": state["searches"] + [record]}
    rendered = render_docs(docs)
    notice = None
    # the turn after this observation is the max_turns-th generation: the last chance to answer
    if state["n_turns"] + 1 >= spec.max_turns or _no_room_for_another_search(state, ctx, rendered):
        notice, update["final_turn"] = spec.final_notice, True
    text = protocol.render_information(rendered, notice=notice) + _final_prefix(spec, update)
    return {**update, **_inject(state, ctx, text)}, "agent"


def _no_room_for_another_search(state: RolloutState, ctx: RolloutContext, rendered: str) -> bool:
    """True when, after this observation, the token budget cannot hold one more search turn and its
    observation (assumed as long as this one) plus a final turn: the next turn is then the last one, so a
    rollout that runs out of tokens still gets its last chance to answer instead of being cut off."""
    spec = ctx.spec
    observation = len(ctx.policy.encode_text(protocol.render_information(rendered, notice=spec.final_notice)))
    room = spec.max_total_tokens - len(state["completion_ids"]) - observation
    return room < 2 * spec.max_tokens_per_turn + observation


def solver_spec(cfg: SolverConfig, greedy: bool = False) -> LoopSpec:
    """LoopSpec from a :class:`sesa_graph.config.SolverConfig`."""
    return LoopSpec(
        role="solver",
        stops=protocol.SOLVER_STOPS,
        allowed=protocol.SOLVER_ACTIONS,
        terminal="answer",
        invalid_notice=prompts.INVALID_ACTION,
        final_notice=prompts.FINAL_TURN_FORCED_NOTICE
        if cfg.force_final_answer
        else prompts.FINAL_TURN_NOTICE,
        max_turns=cfg.max_turns,
        max_tokens_per_turn=cfg.max_tokens_per_turn,
        max_total_tokens=cfg.max_total_tokens,
        temperature=0.0 if greedy else cfg.temperature,
        top_p=cfg.top_p,
        search_k=cfg.search_k,
        doc_chars=cfg.doc_chars,
        force_final_action=cfg.force_final_answer,
    )


def proposer_spec(cfg: ProposerConfig, search_k: int = 3, doc_chars: int = 400) -> LoopSpec:
    """LoopSpec from a :class:`sesa_graph.config.ProposerConfig`. ``search_k`` and ``doc_chars`` are the
    solver's (``cfg.solver``), so the proposer's evidence looks like what the solver will retrieve."""
    return LoopSpec(
        role="proposer",
        stops=protocol.PROPOSER_STOPS,
        allowed=protocol.PROPOSER_ACTIONS,
        terminal="question",
        invalid_notice=prompts.PROPOSER_INVALID_ACTION,
        final_notice=prompts.PROPOSER_FINAL_FORCED_NOTICE
        if cfg.force_final_question
        else prompts.PROPOSER_FINAL_NOTICE,
        max_turns=cfg.max_turns,
        max_tokens_per_turn=cfg.max_tokens_per_turn,
        max_total_tokens=cfg.max_total_tokens,
        temperature=cfg.temperature,
        search_k=search_k,
        doc_chars=doc_chars,
        force_final_action=cfg.force_final_question,
    )
