"""Default run-time contexts for graphs invoked without one (``langgraph dev``, LangGraph Studio).

Built lazily from the default run config (``configs/tiny-cpu.yaml``) once per process, so the served
graphs run on the embedded policy and BM25 just as ``sesa rollout`` does.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from graphs import contexts


@lru_cache(maxsize=1)
def _parts() -> tuple[Any, Any, Any]:
    from sesa_graph.config import load_config
    from sesa_graph.policy.factory import make_policy
    from tools.backends import make_backend

    cfg = load_config()
    return cfg, make_policy(cfg.solver_policy), make_backend(cfg.search)


def solver_context() -> Any:
    cfg, policy, search = _parts()
    return contexts.solver_context(cfg.solver, policy, search, greedy=True)


def propose_context() -> Any:
    cfg, policy, search = _parts()
    return contexts.propose_context(cfg, policy, search, judge=policy)


def selfplay_context() -> Any:
    from graphs.selfplay import SelfPlayContext
    from sesa_graph.rollout.judge import Judge

    cfg = _parts()[0]
    return SelfPlayContext(
        proposer=propose_context(),
        solver=solver_context(),
        judge=Judge(None),
        group_size=cfg.solver.group_size,
        rewards=cfg.rewards,
    )
