"""The self-play step graph: one (target, hops) item -> proposal -> G solver rollouts -> judge -> rewards.

    START -> propose --(invalid)--> score -> END
                     --(valid)----> skills --Send x G--> solve --> score -> END

Each solver rollout is its own invocation of the solve graph (fanned out with ``Send``), so the G rollouts
of a group never wait for each other turn by turn; the local policy micro-batches whatever is in flight.
A step runs many items at once with ``abatch(max_concurrency=...)`` and no checkpointer: training
rollouts are not resumed mid-step, the step is (see ``training``). Skills enter only through
``SelfPlayContext.memory`` (anything with ``retrieve_scored``, ``render`` and ``shown``); the proposer has
no path to them.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from graphs import defaults
from graphs.contexts import ProposeContext, recursion_limit
from graphs.propose import graph as propose_graph
from graphs.solve import graph as solve_graph
from graphs.studio_config import StudioConfig
from sesa_graph import rewards
from sesa_graph.config import RewardConfig
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.rollout.judge import Judge
from sesa_graph.rollout.loop import RolloutContext, turn_cap_cuts
from sesa_graph.state import SelfPlayItem
from sesa_graph.trajectory import Trajectory

log = logging.getLogger(__name__)


class SkillSource(Protocol):
    """What the self-play step needs of the skill memory (``sesa_graph.memory.SkillMemory``)."""

    def retrieve_scored(
        self, questions: Sequence[str], k: int | None = None
    ) -> list[list[tuple[Any, Any]]]: ...

    def render(self, skills: Sequence[Any]) -> str: ...

    def shown(self, skills: Sequence[Any]) -> list[Any]: ...


class SelfPlayInput(TypedDict, total=False):
    """Input of the self-play step graph: one target (the rest of :class:`SelfPlayItem` is its output)."""

    item_id: str
    target: str
    hops: int
    examples: str | None
    """Example questions from the target's pool row, shown to the proposer."""
    reuse_question: str | None
    """A question to ask the solver group instead of making a proposal."""


@dataclass
class SelfPlayContext:
    proposer: ProposeContext
    solver: RolloutContext
    judge: Judge
    group_size: int = 5
    rewards: RewardConfig = field(default_factory=RewardConfig)
    memory: SkillSource | None = None


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
    # served runs send a StudioConfig; run_step passes a SelfPlayContext, which LangGraph hands through
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


@dataclass
class StepOutput:
    """Everything one self-play step produced."""

    items: list[dict[str, Any]]
    proposer: list[Trajectory]
    solver: list[Trajectory]
    failures: list[dict[str, Any]]
    """Failed, well-formed solver rollouts that searched, with their evidence and group success rate (for
    the skill memory's queue, which keeps the frontier ones)."""
    outcomes: list[tuple[list[str], bool, str]]
    """(retrieved skill ids, correct, status) per solver rollout (for the bank's counters)."""
    metrics: dict[str, Any]


async def run_step(
    items: list[dict[str, Any]],
    ctx: SelfPlayContext,
    step: int = 0,
    run: str = "",
    max_concurrency: int = 8,
    bank_version: int | None = None,
    policy_versions: tuple[int, int] = (0, 0),
) -> StepOutput:
    """Run the self-play graph over a batch of ``{"item_id", "target", "hops"}`` and collect records."""
    for it in items:
        if not str(it.get("target", "")).strip():
            raise ValueError(f"self-play item {it.get('item_id')!r} has an empty target")
    finals = await graph.abatch(
        [dict(it, rollouts=[]) for it in items],
        config={"max_concurrency": max_concurrency, "recursion_limit": recursion_limit()},
        context=ctx,
    )
    # the skill memory's own settings say how much of a failure's evidence its distiller gets to see
    mcfg = getattr(ctx.memory, "config", None)
    mcfg = mcfg if isinstance(mcfg, MemoryConfig) else MemoryConfig()
    return collect(
        items,
        finals,
        step,
        run,
        bank_version,
        policy_versions,
        ctx.judge,
        evidence_docs=mcfg.evidence_docs,
        evidence_chars=mcfg.evidence_chars,
    )


def failure_evidence(searches: list[dict[str, Any]], docs: int, chars: int) -> list[dict[str, str]]:
    """The first ``docs`` distinct documents a rollout retrieved, in order, text cut to ``chars``."""
    out: dict[str, dict[str, str]] = {}
    for s in searches:
        for d in s.get("docs", []):
            if len(out) >= docs:
                return list(out.values())
            key = d.get("id") or d.get("title", "")
            if key not in out:
                out[key] = {"title": d.get("title", ""), "text": d.get("text", "")[:chars]}
    return list(out.values())


def collect(
    items: list[dict[str, Any]],
    finals: list[dict[str, Any]],
    step: int,
    run: str,
    bank_version: int | None,
    policy_versions: tuple[int, int],
    judge: Judge,
    evidence_docs: int = 4,
    evidence_chars: int = 240,
) -> StepOutput:
    """Trajectories, outcomes and failure records of a step's finished items. Every wrong, answered rollout
    that searched is a failure record, with its group's success rate; the skill memory decides which of
    them it queues (``MemoryConfig.failure_source``)."""
    proposer, solver, failures, outcomes = [], [], [], []
    reasons: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    for it, out in zip(items, finals):
        qid = str(it.get("item_id", it["target"]))
        prop = out["proposal"]
        question = prop.get("final") or ""
        reused = bool(prop.get("reused"))
        if not reused:
            proposer.append(
                Trajectory.from_state(
                    "proposer",
                    prop,
                    run=run,
                    step=step,
                    question_id=qid,
                    group_id=f"{step}:{qid}:p",
                    question=question,
                    target=it["target"],
                    hops=it.get("hops", 1),
                    valid=bool(prop.get("valid")),
                    invalid_reason=prop.get("invalid_reason"),
                    reward=out["proposer_reward"],
                    success_rate=out.get("success_rate"),
                    trainable=prop.get("status") != "search_error",
                    policy_version=policy_versions[0],
                )
            )
        if not prop.get("valid"):
            reasons[prop.get("invalid_reason") or "unknown"] += 1
            continue
        for r, v, rew in zip(
            sorted(out["rollouts"], key=lambda r: r["sample"]), out["verdicts"], out["solver_rewards"]
        ):
            statuses[r["status"]] += 1
            t = Trajectory.from_state(
                "solver",
                r,
                run=run,
                step=step,
                question_id=qid,
                group_id=f"{step}:{qid}:s",
                sample=r["sample"],
                question=question,
                target=it["target"],
                hops=it.get("hops", 1),
                skill_ids=out.get("skill_ids", []),
                skill_bank_version=bank_version,
                verdict_json=_json(v),
                correct=v["correct"],
                reward=rew,
                success_rate=out["success_rate"],
                trainable=r["status"] != "search_error",
                reused=reused,
                policy_version=policy_versions[1],
            )
            solver.append(t)
            outcomes.append((t.skill_ids, bool(v["correct"]), t.status))
            if not v["correct"] and t.status == "answered" and t.n_searches > 0:
                failures.append(_failure(t, it["target"], out, evidence_docs, evidence_chars))
    metrics = step_metrics(step, finals, proposer, solver, reasons, statuses, judge)
    metrics["failures"] = len(failures)
    return StepOutput(list(finals), proposer, solver, failures, outcomes, metrics)


def _failure(t: Trajectory, target: str, out: dict[str, Any], docs: int, chars: int) -> dict[str, Any]:
    """The failure record of a wrong, answered solver rollout that searched (what the distiller reads)."""
    return {
        "question": t.question,
        "answer": t.final,
        "golds": [target],
        "searches": [s["query"] for s in t.searches],
        "retrieved_skill_ids": t.skill_ids,
        "status": t.status,
        "correct": False,
        "step": t.step,
        "question_id": t.question_id,
        "evidence": failure_evidence(t.searches, docs, chars),
        "group_success_rate": out["success_rate"],
        "skill_similarity": out.get("skill_similarity"),
    }


def step_metrics(
    step: int,
    finals: list[dict[str, Any]],
    proposer: list[Trajectory],
    solver: list[Trajectory],
    reasons: Counter[str],
    statuses: Counter[str],
    judge: Judge,
) -> dict[str, Any]:
    """The step's metrics line (less the failure count): proposals, rewards, frontier groups, how solver
    rollouts ended, judge methods, hop counts, searches per proposal, turns cut by the turn cap."""
    valid = [o for o in finals if o["proposal"].get("valid") and not o["proposal"].get("reused")]
    # every solver group counts for the frontier, reused questions included
    rates = [
        o["success_rate"] for o in finals if o["proposal"].get("valid") and o.get("success_rate") is not None
    ]
    metrics = {
        "step": step,
        "items": sum(1 for o in finals if not o["proposal"].get("reused")),
        "valid_proposals": len(valid),
        "valid_rate": len(valid) / max(len(proposer), 1),
        "reused_groups": sum(1 for o in finals if o["proposal"].get("reused")),
        "invalid_reasons": dict(reasons),
        "proposer_reward_mean": _mean([t.reward for t in proposer]),
        "solver_reward_mean": _mean([t.reward for t in solver]),
        "solver_success_rates": rates,
        "frontier_groups": sum(1 for p in rates if 0 < p < 1),
        "solver_status": dict(statuses),
        "search_errors": statuses.get("search_error", 0),
        "judge_unavailable": judge.unavailable_count,
        "judge_methods": dict(
            Counter(json.loads(t.verdict_json)["method"] for t in solver if t.verdict_json)
        ),
        "correct_by": correct_by(solver),
        "proposals_by_hops": _by_hops(proposer),
        "proposal_searches": dict(sorted(Counter(str(t.n_searches) for t in proposer).items())),
        # turns max_tokens_per_turn cut (each parses as unfinished and is wasted), per role
        "turns_cut_by_turn_cap": {
            "proposer": turn_cap_cuts([t.turns for t in proposer]),
            "solver": turn_cap_cuts([t.turns for t in solver]),
        },
    }
    return metrics


def correct_by(solver: list[Trajectory]) -> dict[str, int]:
    """How many solver rollouts were judged correct by each method ('exact', 'llm'): a reader sees at once
    when a model judge, not exact match, carries the solver's reward."""
    verdicts = (json.loads(t.verdict_json) for t in solver if t.verdict_json)
    return dict(Counter(v["method"] for v in verdicts if v.get("correct")))


def _by_hops(proposer: list[Trajectory]) -> dict[str, dict[str, int]]:
    """Valid and total proposals per hop count."""
    out: dict[str, dict[str, int]] = {}
    for t in proposer:
        row = out.setdefault(str(t.hops), {"valid": 0, "total": 0})
        row["valid"] += int(bool(t.valid))
        row["total"] += 1
    return dict(sorted(out.items()))


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _json(obj: Any) -> str:
    return json.dumps(obj)
