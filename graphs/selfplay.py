"""The self-play step graph: one (target, hops) item -> proposal -> G solver rollouts -> judge -> rewards.

    START -> propose --(invalid)--> score -> END
                     --(valid)----> skills --Send x G--> solve --> score -> END

Each solver rollout is its own invocation of the solve graph (fanned out with ``Send``), so the G rollouts
of a group never wait for each other turn by turn; the local policy micro-batches whatever is in flight.
A step runs many items at once with ``abatch(max_concurrency=...)`` and no checkpointer: training
rollouts are not resumed mid-step, the step is (``training.step`` runs it and keeps its records). Skills enter only through
``SelfPlayContext.memory`` (anything with ``retrieve_scored``, ``render`` and ``shown``); the proposer has
no path to them.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from graphs import defaults
from graphs.contexts import SelfPlayContext, recursion_limit
from graphs.propose import graph as propose_graph
from graphs.solve import graph as solve_graph
from graphs.studio_config import StudioConfig
from sesa_graph import rewards
from sesa_graph.state import SelfPlayItem


class SelfPlayInput(TypedDict, total=False):
    """Input of the self-play step graph: one target (the rest of :class:`SelfPlayItem` is its output)."""

    item_id: str
    target: str
    hops: int
    examples: str | None
    """Example questions from the target's pool row, shown to the proposer."""
    reuse_question: str | None
    """A question to ask the solver group instead of making a proposal."""


async def propose(state: SelfPlayItem, runtime: Runtime[SelfPlayContext]) -> dict[str, Any]:
    ctx = await _ctx(runtime)
    if state.get("reuse_question"):  # a question from an earlier step refills the solver batch: no proposal
        return {"proposal": {"final": state["reuse_question"], "valid": True, "reused": True}}
    out = await propose_graph.ainvoke(
        {"target": state["target"], "hops": state.get("hops", 1), "examples": state.get("examples")},
        context=ctx.proposer,
        config={"recursion_limit": recursion_limit(ctx.proposer.spec.max_turns)},
    )
    return {"proposal": dict(out)}


def after_propose(state: SelfPlayItem) -> Literal["skills", "score"]:
    return "skills" if state["proposal"].get("valid") else "score"


async def skills(state: SelfPlayItem, runtime: Runtime[SelfPlayContext]) -> dict[str, Any]:
    memory = (await _ctx(runtime)).memory
    if memory is None:
        return {"skill_ids": [], "skills_block": None, "skill_similarity": None}
    (hits,) = memory.retrieve_scored([state["proposal"]["final"]])
    # only the skills the render budget kept are in the prompt, so only they are credited with the outcome
    shown = memory.shown([s for s, _ in hits])
    sims = [sim for _, sim in hits[: len(shown)] if sim is not None]
    return {
        "skill_ids": [s.id for s in shown],
        "skills_block": memory.render(shown) or None,
        "skill_similarity": max(sims) if sims else None,
    }


async def fan_out(state: SelfPlayItem, runtime: Runtime[SelfPlayContext]) -> list[Send]:
    question = state["proposal"]["final"]
    return [
        Send("solve", {"sample": i, "question": question, "skills_block": state.get("skills_block")})
        for i in range((await _ctx(runtime)).group_size)
    ]


async def solve(payload: dict[str, Any], runtime: Runtime[SelfPlayContext]) -> dict[str, Any]:
    ctx = (await _ctx(runtime)).solver
    out = await solve_graph.ainvoke(
        {"question": payload["question"], "skills_block": payload.get("skills_block")},
        context=ctx,
        config={"recursion_limit": recursion_limit(ctx.spec.max_turns)},
    )
    return {"rollouts": [{**dict(out), "sample": payload["sample"]}]}


async def score(state: SelfPlayItem, runtime: Runtime[SelfPlayContext]) -> dict[str, Any]:
    ctx = await _ctx(runtime)
    proposal = state["proposal"]
    rcfg = ctx.rewards
    if not proposal.get("valid"):
        return {
            "verdicts": [],
            "success_rate": None,
            "solver_rewards": [],
            # a search-server failure is not the proposer's fault: 0, and the trajectory is not trained on
            "proposer_reward": 0.0 if proposal.get("status") == "search_error" else rcfg.format_penalty,
        }
    rollouts = sorted(state.get("rollouts", []), key=lambda r: r["sample"])
    items = [(proposal["final"], r.get("final"), [state["target"]]) for r in rollouts]
    verdicts = await ctx.judge.judge_many(items)
    usable = [v for r, v in zip(rollouts, verdicts) if r["status"] != "search_error"]
    p = rewards.success_rate(v.score for v in usable) if usable else None
    reward = (
        rewards.proposer_reward(
            p, rcfg.proposer, lam=rcfg.frontier_lambda, format_penalty=rcfg.format_penalty
        )
        if p is not None
        else 0.0
    )
    return {
        "rollouts": [],
        "verdicts": [v.model_dump() for v in verdicts],
        "success_rate": p,
        "solver_rewards": [rewards.solver_reward(v) for v in verdicts],
        "proposer_reward": reward,
    }


_ctx = defaults.node_context(SelfPlayContext, defaults.served_selfplay_context)


def build_selfplay_graph():
    # served runs send a StudioConfig; training.step passes a SelfPlayContext, which LangGraph hands through
    g = StateGraph(
        SelfPlayItem, context_schema=StudioConfig, input_schema=SelfPlayInput, output_schema=SelfPlayItem
    )
    g.add_node("propose", propose)
    g.add_node("skills", skills)
    g.add_node("solve", solve)
    g.add_node("score", score)
    g.add_edge(START, "propose")
    g.add_conditional_edges("propose", after_propose, ["skills", "score"])
    g.add_conditional_edges("skills", fan_out, ["solve"])
    g.add_edge("solve", "score")
    g.add_edge("score", END)
    return g.compile()


graph = build_selfplay_graph()
