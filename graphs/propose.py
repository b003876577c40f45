"""The propose graph: target answer + hop count -> searches -> ``<question>`` -> validation.

    START -> start -> agent --(search)--> search -> agent ... --(question / out of turns)--> validate -> END

The proposer's state has no skills field and its prompts are built only from the target and hop count:
the skill bank is the solver's alone.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from graphs import defaults
from graphs.contexts import ProposeContext, recursion_limit
from graphs.studio_config import StudioConfig
from sesa_graph import prompts
from sesa_graph.config import ProposerConfig
from sesa_graph.corpus.targets import MAX_HOPS
from sesa_graph.rollout import proposal_checks
from sesa_graph.rollout.loop import generate_turn, initial_state, run_search
from sesa_graph.state import ProposeInput, ProposeState


def proposer_messages(target: str, hops: int, examples: str | None = None) -> list[dict[str, str]]:
    """The proposer's prompt: the target, its hop count and, when its pool row has them, example questions."""
    return [
        {"role": "system", "content": prompts.PROPOSER_SYSTEM},
        {"role": "user", "content": prompts.render_proposer_user(target, hops, examples)},
    ]


async def start(state: ProposeState, runtime: Runtime[ProposeContext]) -> dict[str, Any]:
    target = (state.get("target") or "").strip()
    hops = state.get("hops", 1)
    if not target:
        raise ValueError("the propose graph needs a non-empty 'target'")
    if not isinstance(hops, int) or not 1 <= hops <= MAX_HOPS:
        raise ValueError(f"hops must be an integer in 1..{MAX_HOPS}, got {hops!r}")
    messages = proposer_messages(target, hops, state.get("examples"))
    ids = (await _ctx(runtime)).policy.encode_messages(messages)
    return {**initial_state(ids), "target": target, "hops": hops}


async def agent(
    state: ProposeState, runtime: Runtime[ProposeContext]
) -> Command[Literal["search", "agent", "validate"]]:
    update, route = await generate_turn(state, await _ctx(runtime))
    return Command(update=update, goto="validate" if route == "end" else route)


async def search(
    state: ProposeState, runtime: Runtime[ProposeContext]
) -> Command[Literal["agent", "validate"]]:
    update, route = await run_search(state, await _ctx(runtime))
    return Command(update=update, goto="validate" if route == "end" else route)


async def validate(state: ProposeState, runtime: Runtime[ProposeContext]) -> dict[str, Any]:
    """The ``validate`` node: :func:`sesa_graph.rollout.proposal_checks.validate` on the final question."""
    ctx = await _ctx(runtime)
    result = await proposal_checks.validate(
        dict(state),
        ctx.checks or ProposerConfig(),
        ctx.judge,
        ctx.search,
        ctx.seed or 0,
        doc_chars=ctx.spec.doc_chars,
        distractor_queries=ctx.distractor_queries,
        matcher=ctx.matcher,
    )
    return {"valid": result.valid, "invalid_reason": result.reason, "rag_answer": result.rag_answer}


_ctx = defaults.node_context(ProposeContext, defaults.served_propose_context)


def build_propose_graph():
    # served runs send a StudioConfig; programmatic callers a ProposeContext, passed through as it is
    g = StateGraph(ProposeState, context_schema=StudioConfig, input_schema=ProposeInput)
    g.add_node("start", start)
    g.add_node("agent", agent)
    g.add_node("search", search)
    g.add_node("validate", validate)
    g.add_edge(START, "start")
    g.add_edge("start", "agent")
    g.add_edge("validate", END)
    return g.compile()


graph = build_propose_graph()


async def propose(target: str, hops: int, ctx: ProposeContext, examples: str | None = None) -> ProposeState:
    """Run one proposer rollout + validation and return its final state."""
    return await graph.ainvoke(
        {"target": target, "hops": hops, "examples": examples},
        context=ctx,
        config={"recursion_limit": recursion_limit(ctx.spec.max_turns)},
    )
