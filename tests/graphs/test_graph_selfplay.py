"""One self-play step with scripted policies: validation, fan-out, judging, rewards, skills isolation."""

import asyncio
from dataclasses import replace
from types import SimpleNamespace

import pytest

from graphs.contexts import SelfPlayContext
from graphs.propose import ProposeContext
from sesa_graph.config import ProposerConfig, SolverConfig
from sesa_graph.rollout.judge import Judge
from sesa_graph.rollout.loop import RolloutContext, proposer_spec, solver_spec
from tests.graphs.conftest import ScriptedPolicy
from training.step import collect, play

SECRET = "ZEBRA-SKILL-TEXT"


async def run_step(items, ctx, step=0, run=""):
    """The graph over ``items`` and the records ``training.step`` makes of them."""
    return collect(items, await play(items, ctx), step, run, None, (0, 0), ctx)


class FakeMemory:
    def __init__(self, fits=2):
        self.asked = []
        self.fits = fits  # how many skills the render budget keeps

    def retrieve_scored(self, questions, k=None):
        self.asked.extend(questions)
        return [[(SimpleNamespace(id="s1"), 0.4), (SimpleNamespace(id="s2"), 0.7)] for _ in questions]

    def render(self, skills):
        return f"Search tips: {SECRET} " + " ".join(s.id for s in skills)

    def shown(self, skills):
        return list(skills[: self.fits])


def proposer_script(prompt, i):
    if "Target answer: Dijon" in prompt:
        if "Doc 1 (Title:" not in prompt:
            return "<search>Gustave Eiffel</search>"
        return "<question>In which city was the engineer of the Paris tower born?</question>"
    return "<question>Where?</question>"  # invalid: too few words


def solver_script(prompt, i):
    # 2 of 5 rollouts answer right: p = 0.4
    return "<answer>Dijon</answer>" if i % 5 in (0, 3) else "<answer>Lyon</answer>"


@pytest.fixture
def ctx(tokenizer, search):
    pc = ProposerConfig(max_turns=3, rag_check=False)
    proposer = ScriptedPolicy(tokenizer, proposer_script)
    solver = ScriptedPolicy(tokenizer, solver_script)
    return SelfPlayContext(
        proposer=ProposeContext(proposer, search, proposer_spec(pc), checks=pc),
        solver=RolloutContext(solver, search, solver_spec(SolverConfig(max_turns=2))),
        judge=Judge(None),
        group_size=5,
        memory=FakeMemory(),
    )


def test_step_records_rewards_and_failures(ctx):
    items = [{"item_id": "a", "target": "Dijon", "hops": 1}, {"item_id": "b", "target": "Lyon", "hops": 1}]
    out = asyncio.run(run_step(items, ctx, step=3, run="t"))
    m = out.metrics
    assert m["valid_proposals"] == 1 and m["invalid_reasons"] == {"too_few_words": 1}
    assert m["solver_success_rates"] == [pytest.approx(0.4)]
    by_target = {t.target: t for t in out.proposer}
    assert by_target["Dijon"].reward == pytest.approx(4 * 0.4 * 0.6)  # frontier shaping
    assert by_target["Lyon"].reward == -1.0  # format penalty
    assert len(out.solver) == 5 and sorted(t.reward for t in out.solver) == [0, 0, 0, 1, 1]
    assert all(t.group_id == "3:a:s" and t.skill_ids == ["s1", "s2"] for t in out.solver)
    assert len(out.outcomes) == 5 and sum(c for _, c, _ in out.outcomes) == 2
    # wrong answers without a search are not queued as failures (nothing to learn about searching)
    assert out.failures == []
    # what the GPU smoke run reports: validity by hop count, searches a proposal, how verdicts were reached
    assert m["proposals_by_hops"] == {"1": {"valid": 1, "total": 2}}
    assert m["proposal_searches"] == {"0": 1, "1": 1}
    assert m["judge_methods"] == {"exact": 5}


def test_only_the_solver_sees_skills(ctx):
    items = [{"item_id": "a", "target": "Dijon", "hops": 1}]
    asyncio.run(run_step(items, ctx))
    assert all(SECRET in p for p in ctx.solver.policy.prompts)
    assert not any(SECRET in p for p in ctx.proposer.policy.prompts)
    assert ctx.memory.asked == ["In which city was the engineer of the Paris tower born?"]


def test_reused_question_skips_the_proposer(ctx):
    items = [
        {"item_id": "r", "target": "Dijon", "hops": 1, "reuse_question": "Birthplace of Gustave Eiffel?"}
    ]
    out = asyncio.run(run_step(items, ctx))
    assert out.proposer == [] and len(out.solver) == 5
    assert all(t.reused and t.question == "Birthplace of Gustave Eiffel?" for t in out.solver)
    assert ctx.proposer.policy.calls == 0


def test_empty_target_is_an_error(ctx):
    with pytest.raises(ValueError, match="empty target"):
        asyncio.run(run_step([{"item_id": "x", "target": ""}], ctx))


def searching_solver():
    answers = []

    def script(prompt, i):
        # every rollout searches first; then the first 2 of 5 to answer are right (p = 0.4)
        if "Doc 1 (Title:" not in prompt:
            return "<search>Gustave Eiffel tower</search>"
        answers.append(i)
        return "<answer>Dijon</answer>" if len(answers) <= 2 else "<answer>Lyon</answer>"

    return script


def test_failures_carry_evidence_and_the_groups_success_rate(ctx, tokenizer, search):
    from sesa_graph.memory.config import MemoryConfig

    ctx.solver.policy = ScriptedPolicy(tokenizer, searching_solver())
    ctx.memory.config = MemoryConfig(evidence_docs=2, evidence_chars=30)
    out = asyncio.run(run_step([{"item_id": "a", "target": "Dijon", "hops": 1}], ctx, step=2))
    assert out.metrics["solver_success_rates"] == [pytest.approx(0.4)]
    assert len(out.failures) == 3
    for f in out.failures:
        assert f["group_success_rate"] == pytest.approx(0.4) and f["searches"] == ["Gustave Eiffel tower"]
        # the rollout's distinct documents in retrieval order, at most evidence_docs, cut to evidence_chars
        assert [e["title"] for e in f["evidence"]] == ["Eiffel Tower", "Gustave Eiffel"]
        assert all(len(e["text"]) <= 30 for e in f["evidence"])
        assert f["evidence"][0]["text"] == "The Eiffel Tower is a lattice "


def test_failure_evidence_dedupes_and_caps():
    from training.step import failure_evidence

    doc = {"id": "a", "title": "A", "text": "x" * 50}
    searches = [
        {"query": "q1", "docs": [doc, {"id": "b", "title": "B", "text": "y"}]},
        {"query": "q2", "docs": [doc]},
    ]
    assert failure_evidence(searches, 4, 10) == [
        {"title": "A", "text": "x" * 10},
        {"title": "B", "text": "y"},
    ]
    assert failure_evidence(searches, 1, 10) == [{"title": "A", "text": "x" * 10}]
    assert failure_evidence(searches, 0, 10) == []


def test_only_skills_in_the_prompt_are_credited(ctx, tokenizer):
    ctx.solver.policy = ScriptedPolicy(tokenizer, searching_solver())
    ctx.memory.fits = 1  # the render budget keeps the first skill only
    out = asyncio.run(run_step([{"item_id": "a", "target": "Dijon", "hops": 1}], ctx, step=2))
    assert all(t.skill_ids == ["s1"] for t in out.solver)
    assert all(ids == ["s1"] for ids, _, _ in out.outcomes)
    assert not any("s2" in p for p in ctx.solver.policy.prompts)
    # the failure records the best similarity among the shown skills (s2's 0.7 was not shown)
    assert out.failures and all(f["skill_similarity"] == 0.4 for f in out.failures)


def test_a_proposal_ended_by_a_search_error_is_not_trained(ctx, tokenizer):
    from tests.graphs.conftest import ListSearch

    ctx.proposer.search = ListSearch([], fail=True)
    ctx.proposer.spec = replace(ctx.proposer.spec, search_retries=0)
    out = asyncio.run(run_step([{"item_id": "a", "target": "Dijon", "hops": 1}], ctx))
    (t,) = out.proposer
    assert t.invalid_reason == "no_question:search_error"
    assert t.reward == 0.0 and t.trainable is False  # not -1: the search server failed, not the proposer
