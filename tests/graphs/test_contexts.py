"""graphs.contexts: the one place that builds the rollout contexts from a run config, and the one recursion
limit, used by training, the eval, the CLI and ``langgraph dev``."""

import ast
import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from graphs import defaults
from graphs.contexts import ProposeContext, propose_context, recursion_limit, solver_context
from graphs.propose import propose
from graphs.solve import solve
from sesa_graph.config import load_config
from sesa_graph.rollout.loop import RolloutContext, proposer_spec, solver_spec
from tests.graphs.conftest import DOCS, ListSearch, ScriptedPolicy

ROOT = Path(__file__).resolve().parents[2]


def test_solver_context_reads_the_solver_config():
    cfg = load_config(None)
    policy, search = object(), object()
    greedy = solver_context(cfg.solver, policy, search, greedy=True)
    assert greedy == RolloutContext(policy, search, solver_spec(cfg.solver, greedy=True), seed=None)
    assert greedy.spec.temperature == 0.0 and greedy.spec.doc_chars == cfg.solver.doc_chars
    sampled = solver_context(cfg.solver, policy, search, seed=3)
    assert sampled.spec == solver_spec(cfg.solver) and sampled.spec.temperature == cfg.solver.temperature
    assert sampled.seed == 3


def test_propose_context_takes_the_run_configs_budgets_and_the_solvers_search():
    cfg = load_config(None, {"solver.doc_chars": 123, "solver.search_k": 2})
    policy, search, reader = object(), object(), object()
    ctx = propose_context(cfg, policy, search, judge=reader, seed=7, distractor_queries=["a", "b"])
    assert isinstance(ctx, ProposeContext)
    assert ctx.spec == proposer_spec(cfg.proposer, 2, 123)
    assert (ctx.spec.doc_chars, ctx.spec.search_k, ctx.spec.max_turns) == (123, 2, cfg.proposer.max_turns)
    assert ctx.checks is cfg.proposer and ctx.judge is reader and ctx.seed == 7
    assert list(ctx.distractor_queries) == ["a", "b"]
    bare = propose_context(cfg, policy, search)
    assert bare.judge is None and bare.seed is None and not bare.distractor_queries


def test_langgraph_defaults_are_the_run_configs(monkeypatch):
    cfg = load_config(None, {"solver.doc_chars": 77})
    policy, search = object(), object()
    monkeypatch.setattr(defaults, "_parts", lambda: (cfg, policy, search))
    assert defaults.solver_context() == solver_context(cfg.solver, policy, search, greedy=True)
    prop = defaults.propose_context()
    assert prop == propose_context(cfg, policy, search, judge=policy)
    assert prop.spec.doc_chars == 77  # not proposer_spec's own 400-character default


def test_a_node_takes_the_callers_context_as_it_is_and_builds_a_served_one_from_its_configuration():
    built = []

    async def served(raw):
        built.append(raw)
        return "served context"

    context = defaults.node_context(RolloutContext, served)
    live = solver_context(load_config(None).solver, object(), object())
    assert asyncio.run(context(SimpleNamespace(context=live))) is live and not built
    assert asyncio.run(context(SimpleNamespace(context={"max_turns": 1}))) == "served context"
    assert asyncio.run(context(SimpleNamespace(context=None))) == "served context"
    assert built == [{"max_turns": 1}, None]
    # a caller's own context brings its skills in the state: no served bank is opened for it
    assert asyncio.run(defaults.served_skills(live, "Q?")) is None


@pytest.mark.parametrize("max_turns", [1, 3])
def test_a_rollout_that_uses_every_turn_stays_within_the_limit(tokenizer, max_turns):
    # always searching: every turn and the search after it, the last of max_turns generations the last chance
    big = {"solver.max_total_tokens": 100_000, "proposer.max_total_tokens": 100_000}
    cfg = load_config(None, {"solver.max_turns": max_turns, "proposer.max_turns": max_turns, **big})
    policy = ScriptedPolicy(tokenizer, ["<search>Paris</search>"])
    out = asyncio.run(solve("Q?", solver_context(cfg.solver, policy, ListSearch(DOCS))))
    assert out["status"] == "max_turns" and out["n_turns"] == max_turns
    out = asyncio.run(propose("Paris", 1, propose_context(cfg, policy, ListSearch(DOCS))))
    assert out["status"] == "max_turns" and out["n_turns"] == max_turns
    assert recursion_limit(max_turns) >= 2 * max_turns + 4  # the propose graph's supersteps, plus one
    assert recursion_limit() > 4  # the self-play step graph: propose, skills, solve, score


def _calls(tree: ast.AST, names: set[str]) -> list[int]:
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", None)) in names
    ]


def _literal_limits(tree: ast.AST) -> list[int]:
    """Lines of ``{"recursion_limit": ...}`` whose value is not a call of ``recursion_limit``."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values):
                if (
                    isinstance(k, ast.Constant)
                    and k.value == "recursion_limit"
                    and not _calls(v, {"recursion_limit"})
                ):
                    out.append(k.lineno)
    return out


def test_contexts_and_recursion_limits_are_built_in_one_place():
    sources = [
        p for pkg in ("graphs", "training", "sesa_eval", "sesa_cli") for p in (ROOT / pkg).rglob("*.py")
    ]
    builders = {"RolloutContext", "ProposeContext", "solver_spec", "proposer_spec"}
    offenders = []
    for path in sources:
        tree = ast.parse(path.read_text())
        rel = path.relative_to(ROOT)
        if str(rel) != "graphs/contexts.py":
            offenders += [f"{rel}:{line} builds a rollout context" for line in _calls(tree, builders)]
        offenders += [f"{rel}:{line} has its own recursion limit" for line in _literal_limits(tree)]
    assert not offenders, offenders
