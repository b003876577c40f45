"""The one place that builds the rollout graphs' run-time contexts, and their one recursion limit.

Training (``training.orchestrator``), the eval (``sesa_eval.tasks``), the CLI (``sesa rollout`` /
``sesa propose``) and ``langgraph dev`` (``graphs.defaults``) all build their contexts here, so a budget
read from a run config means the same everywhere: the solver's loop is ``cfg.solver``; the proposer's is
``cfg.proposer`` with the solver's ``search_k`` and ``doc_chars``, so its evidence looks like what the
solver will retrieve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sesa_graph.config import ProposerConfig, RewardConfig, RunConfig, SolverConfig
from sesa_graph.policy import PolicyClient
from sesa_graph.rollout.judge import Judge
from sesa_graph.rollout.loop import RolloutContext, proposer_spec, solver_spec


@dataclass
class ProposeContext(RolloutContext):
    """Rollout context plus what validation needs."""

    checks: ProposerConfig | None = None
    judge: PolicyClient | None = None
    """The RAG check's reader (a fixed model); None skips the check."""
    distractor_queries: Sequence[str] = ()
    """Queries unrelated to any one proposal (e.g. the target pool's answers) whose hits are the RAG check's
    'random' distractors; empty: the question's own hits, as with source 'question'."""
    matcher: Any = None
    """The run's answer judge (``sesa_graph.rollout.judge.Judge``): with ``checks.rag_model_match`` it decides
    a RAG answer that is not an exact match or containment of the target (as SSP); None: exact only."""


class SkillSource(Protocol):
    """What the self-play step needs of the skill memory (``sesa_graph.memory.SkillMemory``)."""

    def retrieve_scored(
        self, questions: Sequence[str], k: int | None = None
    ) -> list[list[tuple[Any, Any]]]: ...

    def render(self, skills: Sequence[Any]) -> str: ...

    def shown(self, skills: Sequence[Any]) -> list[Any]: ...


@dataclass
class SelfPlayContext:
    """The self-play step graph's context (``graphs.selfplay``): both roles' rollout contexts, the judge, and
    the skills only the solver sees."""

    proposer: ProposeContext
    solver: RolloutContext
    judge: Judge
    group_size: int = 5
    rewards: RewardConfig = field(default_factory=RewardConfig)
    memory: SkillSource | None = None


def solver_context(
    solver: SolverConfig,
    policy: PolicyClient,
    search: Any,
    *,
    greedy: bool = False,
    seed: int | None = None,
) -> RolloutContext:
    """The solve graph's context; ``solver`` is a run config's ``cfg.solver`` (or an eval's settings')."""
    return RolloutContext(policy, search, solver_spec(solver, greedy=greedy), seed=seed)


def propose_context(
    cfg: RunConfig,
    policy: PolicyClient,
    search: Any,
    *,
    judge: PolicyClient | None = None,
    seed: int | None = None,
    distractor_queries: Sequence[str] = (),
    matcher: Any = None,
) -> ProposeContext:
    """The propose graph's context: the run's proposer budgets and checks. ``judge`` is the RAG check's
    reader (None skips the check)."""
    return ProposeContext(
        policy,
        search,
        proposer_spec(cfg.proposer, cfg.solver.search_k, cfg.solver.doc_chars),
        seed=seed,
        checks=cfg.proposer,
        judge=judge,
        distractor_queries=distractor_queries,
        matcher=matcher,
    )


def recursion_limit(max_turns: int = 0) -> int:
    """LangGraph's recursion limit (supersteps) for one invocation of a graph in ``graphs/``.

    A rollout graph (solve, propose) takes at most two supersteps per turn (agent + search) plus a few
    fixed ones (start, the last-chance turn, the proposer's validate): ``2 * max_turns + 3`` at most. The
    self-play step graph has no loop of its own (``max_turns=0``): at most four supersteps (propose,
    skills, the fanned-out solves, score); each rollout in it is its own invocation with its own limit.
    ``+ 8`` covers all of them with room to spare: the limit only stops a graph that loops by mistake.
    """
    return 2 * max_turns + 8
