"""The solve graph: one solver rollout of one question, with search.

    START -> agent --(search)--> search -> agent ... --(answer / out of turns)--> END

Run it with a :class:`~sesa_graph.rollout.loop.RolloutContext` as LangGraph run-time context (a
LangGraph server's configuration becomes one in :mod:`graphs.defaults`); the state holds only data. Each
rollout is its own graph invocation, so the G rollouts of a group never wait for each other turn by turn
(they still share one micro-batched policy).
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from graphs import defaults
from graphs.contexts import recursion_limit
from graphs.studio_config import StudioConfig
from sesa_graph import prompts
from sesa_graph.rollout.loop import RolloutContext, generate_turn, initial_state, run_search
from sesa_graph.state import SolveInput, SolveState

_ROUTE = {"search": "search", "agent": "agent", "end": END}


solver_messages = prompts.solver_messages  # re-exported: callers of the graph build prompts through it


async def start(state: SolveState, runtime: Runtime[RolloutContext]) -> dict[str, Any]:
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the solve graph needs a non-empty 'question'")
    ctx = await _ctx(runtime)
    skills = state.get("skills_block")
    if skills is None:
        skills = await defaults.served_skills(runtime.context, question)  # a served run's bank, if any
    msgs = solver_messages(question, skills, ctx.spec.max_turns)
    return {**initial_state(ctx.policy.encode_messages(msgs)), "skills_block": skills}


async def agent(
    state: SolveState, runtime: Runtime[RolloutContext]
) -> Command[Literal["search", "agent", "__end__"]]:
    update, route = await generate_turn(state, await _ctx(runtime))
    return Command(update=update, goto=_ROUTE[route])


async def search(state: SolveState, runtime: Runtime[RolloutContext]) -> Command[Literal["agent", "__end__"]]:
    update, route = await run_search(state, await _ctx(runtime))
    return Command(update=update, goto=_ROUTE[route])


_ctx = defaults.node_context(RolloutContext, defaults.served_solver_context)


def build_solve_graph(
    first: Any = None, state: Any = SolveState, context: Any = StudioConfig, inputs: Any = SolveInput
):
    """The solver loop; ``first`` replaces its start node (the eval's controls begin a rollout differently).

    The declared context schema is what a server sends (JSON); programmatic callers pass a RolloutContext,
    which LangGraph hands through as it is."""
    g = StateGraph(state, context_schema=context, input_schema=inputs)
    g.add_node("start", first or start)
    g.add_node("agent", agent)
    g.add_node("search", search)
    g.add_edge(START, "start")
    g.add_edge("start", "agent")
    return g.compile()


graph = build_solve_graph()


async def solve(question: str, ctx: RolloutContext, skills_block: str | None = None) -> SolveState:
    """Run one solver rollout and return its final state."""
    return await graph.ainvoke(
        {"question": question, "skills_block": skills_block},
        context=ctx,
        config={"recursion_limit": recursion_limit(ctx.spec.max_turns)},
    )
