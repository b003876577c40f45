"""The replay check's rollouts (graphs.skill_replay): the candidate alone in the solver's prompt, the source
failure's question solved greedily and judged against its golds. Scripted answers where the verdict is the
point; the real embedded model, BM25 corpus and judge in the integration test."""

from __future__ import annotations

import pytest

from graphs.contexts import solver_context
from graphs.skill_replay import replay_all, replayer
from sesa_graph.config import load_config
from sesa_graph.memory.queue import FailureRecord
from sesa_graph.memory.skill import Skill, render_for_prompt
from sesa_graph.rollout.judge import Judge
from tests.graphs.conftest import ListSearch, ScriptedPolicy

SKILL = Skill(
    id="d1-abc",
    description="Search the birthplace of the engineer before naming the city a landmark's designer came from.",
    trigger="Questions that chain a landmark, its designer and where that person was born.",
    avoid="Answering with the landmark's own city.",
    queries=["[designer] born"],
)
FAILED = FailureRecord(
    question="In which city was the designer of the Eiffel Tower born?",
    answer="Paris",
    golds=["Dijon"],
    searches=["Eiffel Tower"],
)
ENDED = {"answered", "malformed", "max_turns", "max_tokens", "search_error"}


def _render(skills):
    return render_for_prompt(skills, 2000)


async def _replay(policy, search, pairs):
    cfg = load_config(None, {"solver.max_turns": 2})
    ctx = solver_context(cfg.solver, policy, search, greedy=True)
    return await replay_all(ctx, Judge(None), _render, pairs)


@pytest.mark.parametrize(
    ("reply", "correct"), [("<answer>Dijon</answer>", True), ("<answer>Paris</answer>", False)]
)
def test_the_candidate_is_in_the_prompt_and_the_answer_is_judged(tokenizer, search, reply, correct):
    import asyncio

    policy = ScriptedPolicy(tokenizer, [reply])
    (proof,) = asyncio.run(_replay(policy, search, [(SKILL, FAILED)]))
    assert SKILL.description in policy.prompts[0]
    assert (proof.correct, proof.before, proof.status) == (correct, "Paris", "answered")
    assert proof.answer == reply.removeprefix("<answer>").removesuffix("</answer>")


def test_a_replay_whose_search_failed_is_not_counted_right(tokenizer):
    import asyncio

    from tests.graphs.conftest import DOCS

    policy = ScriptedPolicy(tokenizer, ["<search>Gustave Eiffel born</search>", "<answer>Dijon</answer>"])
    (proof,) = asyncio.run(_replay(policy, ListSearch(DOCS, fail=True), [(SKILL, FAILED)]))
    assert proof.status == "search_error" and not proof.correct


def test_replay_is_built_only_when_asked():
    assert replayer(load_config(None, {"memory.replay": "off"}), None, None, None, _render) is None
    assert (
        replayer(
            load_config(None, {"memory.replay": "record", "memory.mode": "static"}), None, None, None, _render
        )
        is None
    )
    assert callable(replayer(load_config(None, {"memory.replay": "record"}), None, None, None, _render))


@pytest.mark.slow
def test_replay_on_the_embedded_model_corpus_and_judge():
    """The real parts: the embedded SmolLM2 in-process, BM25 over the embedded corpus, exact match."""
    from sesa_graph.model_config import PolicyConfig
    from sesa_graph.policy.factory import make_policy
    from tools.backends import make_backend
    from tools.config import SearchConfig

    cfg = load_config(None, {"memory.replay": "record", "solver.max_turns": 2})
    policy = make_policy(PolicyConfig(model="embedded", backend="local", threads=1))
    seen = []
    real = policy.generate

    async def recording(requests):
        seen.extend(
            policy.tokenizer.decode(r.prompt_ids) if r.prompt_ids is not None else str(r.messages)
            for r in requests
        )
        return await real(requests)

    policy.generate = recording
    replay = replayer(cfg, policy, make_backend(SearchConfig()), Judge(None), _render)
    other = FAILED.model_copy(update={"question": "Who wrote the play Faust?", "golds": ["Goethe"]})
    proofs = replay([(SKILL, FAILED), (SKILL, other)])
    assert [p.question for p in proofs] == [FAILED.question, other.question]
    from sesa_graph.scoring import exact_match

    for proof, record in zip(proofs, (FAILED, other), strict=True):
        assert proof.status in ENDED and proof.before == "Paris"
        assert proof.correct == (
            proof.status != "search_error" and exact_match(proof.answer, record.golds) == 1
        )
    assert SKILL.description[:40] in seen[0]  # the candidate was in the solver's prompt
    assert replay([(SKILL, FAILED)])[0] == proofs[0]  # greedy: the same evidence again
