"""Proposer rollouts and validation, with a scripted proposer and judge."""

import asyncio

import pytest

from graphs.propose import ProposeContext, ProposeInput, propose
from sesa_graph.config import ProposerConfig
from sesa_graph.rollout.loop import proposer_spec
from tests.graphs.conftest import ScriptedPolicy


def _ctx(policy, search, judge=None, **cfg):
    pc = ProposerConfig(**{"max_turns": 4, "rag_check": judge is not None, **cfg})
    return ProposeContext(policy, search, proposer_spec(pc), checks=pc, judge=judge)


def _run(tokenizer, search, script, target="Dijon", hops=1, judge=None, **cfg):
    return asyncio.run(propose(target, hops, _ctx(ScriptedPolicy(tokenizer, script), search, judge, **cfg)))


@pytest.mark.parametrize(
    "script, hops, reason",
    [
        # the question gives the target away
        (
            ["<search>Dijon</search>", "<question>Which city is Dijon in France?</question>"],
            1,
            "target_in_question",
        ),
        # no search before the question: no evidence
        (["<question>Which French city is the birthplace of Gustave Eiffel?</question>"], 1, "no_evidence"),
        # hops=2 but the same query twice
        (
            [
                "<search>Gustave Eiffel</search>",
                "<search>gustave eiffel</search>",
                "<question>Where was the engineer behind the tower born?</question>",
            ],
            2,
            "too_few_searches",
        ),
        # too short
        (["<search>Gustave Eiffel</search>", "<question>Where?</question>"], 1, "too_few_words"),
        # never writes a question
        (["<search>Gustave Eiffel</search>"], 1, "no_question:max_turns"),
        (["gibberish"], 1, "no_question:malformed"),
    ],
)
def test_invalid_proposals_name_their_reason(tokenizer, search, script, hops, reason):
    out = _run(tokenizer, search, script, hops=hops)
    assert out["valid"] is False and out["invalid_reason"] == reason


def test_last_turn_opens_the_question_tag(tokenizer, search):
    # turns run out after two searches; the environment opens <question> and the policy only finishes it
    script = [
        "<search>Gustave Eiffel</search>",
        "<search>Eiffel Tower engineer</search>",
        "In which city was the engineer of the Paris lattice tower born?</question>",
    ]
    policy = ScriptedPolicy(tokenizer, script)
    out = asyncio.run(propose("Dijon", 2, _ctx(policy, search, max_turns=3)))
    assert out["status"] == "answered" and out["final"].startswith("In which city")
    assert policy.prompts[-1].endswith("<question>")
    # without forcing the same rollout is a format failure
    out = asyncio.run(
        propose(
            "Dijon",
            2,
            _ctx(ScriptedPolicy(tokenizer, script), search, max_turns=3, force_final_question=False),
        )
    )
    assert out["invalid_reason"] == "no_question:malformed"


def test_valid_two_hop_proposal_with_rag_check(tokenizer, search):
    script = [
        "<search>Gustave Eiffel</search>",
        "<search>Eiffel Tower engineer</search>",
        "<question>In which city was the engineer whose company designed the Paris lattice tower born?</question>",
    ]
    judge = ScriptedPolicy(tokenizer, ["<answer>Dijon</answer>"])
    out = _run(tokenizer, search, script, hops=2, judge=judge)
    assert out["valid"] is True and out["invalid_reason"] is None and out["rag_answer"] == "Dijon"
    # the judge read the proposer's evidence mixed with distractors
    assert "Gustave Eiffel was a French civil engineer" in judge.prompts[0]


def test_rag_check_failure(tokenizer, search):
    script = [
        "<search>Gustave Eiffel</search>",
        "<question>Which city hosts a famous mustard tradition?</question>",
    ]
    out = _run(tokenizer, search, script, judge=ScriptedPolicy(tokenizer, ["<answer>Lyon</answer>"]))
    assert (
        out["valid"] is False and out["invalid_reason"] == "rag_check_failed" and out["rag_answer"] == "Lyon"
    )


def test_bad_inputs(tokenizer, search):
    with pytest.raises(ValueError, match="target"):
        _run(tokenizer, search, ["x"], target=" ")
    for hops in (0, 6):
        with pytest.raises(ValueError, match="hops"):
            _run(tokenizer, search, ["x"], hops=hops)


def test_proposer_state_has_no_skills_field():
    assert "skills_block" not in ProposeInput.__annotations__
    assert not any("skill" in k for k in ProposeInput.__annotations__)


def test_a_proposal_that_ran_out_of_tokens_says_so(tokenizer, search):
    out = _run(tokenizer, search, ["<search>Gustave Eiffel</search>"], max_turns=10, max_total_tokens=64)
    assert out["valid"] is False and out["invalid_reason"] == "no_question:max_tokens"
