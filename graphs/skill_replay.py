"""The replay check (``memory.replay``): a candidate skill's source failure solved again, greedily, with the
candidate alone in the solver's prompt, and judged by the run's judge, before the candidate is admitted.

It lives here, not in the memory layer, because it runs the solve graph; the memory calls it through
``SkillMemory.replay`` at the step boundary, when no rollout is running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from graphs.contexts import RolloutContext, recursion_limit, solver_context
from graphs.solve import graph as solve_graph
from sesa_graph.config import RunConfig
from sesa_graph.memory.queue import FailureRecord
from sesa_graph.memory.skill import Skill, SkillReplay


async def replay_all(
    solver: RolloutContext,
    judge: Any,
    render: Callable[[list[Skill]], str],
    pairs: Sequence[tuple[Skill, FailureRecord]],
) -> list[SkillReplay]:
    """One greedy solver rollout per (candidate, its source failure), judged; in the order given."""

    async def one(skill: Skill, record: FailureRecord) -> SkillReplay:
        out = await solve_graph.ainvoke(
            {"question": record.question, "skills_block": render([skill]) or None},
            context=solver,
            config={"recursion_limit": recursion_limit(solver.spec.max_turns)},
        )
        (verdict,) = await judge.judge_many([(record.question, out.get("final"), record.golds)])
        return SkillReplay(
            question=record.question,
            before=record.answer,
            answer=out.get("final"),
            correct=bool(verdict.correct) and out["status"] != "search_error",
            status=out["status"],
        )

    return list(await asyncio.gather(*(one(s, r) for s, r in pairs)))


def replayer(
    cfg: RunConfig, policy: Any, search: Any, judge: Any, render: Callable[[list[Skill]], str]
) -> Callable[[list[tuple[Skill, FailureRecord]]], list[SkillReplay]] | None:
    """``SkillMemory.replay`` for a run (None unless memory.replay asks and the bank grows): greedy rollouts
    of the run's solver, so the check is deterministic, blocking, on an event loop of its own (the step
    boundary has none)."""
    if cfg.memory.replay == "off" or cfg.memory.mode != "on":
        return None
    ctx = solver_context(cfg.solver, policy, search, greedy=True)
    return lambda pairs: asyncio.run(replay_all(ctx, judge, render, pairs))
