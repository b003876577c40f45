"""Distiller output parsing, candidate checks, and calling either kind of distiller client."""

import asyncio
import json

import pytest
from fakes import GOOD_SKILLS, ScriptedDistiller, failure
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from sesa_graph.memory import MemoryConfig
from sesa_graph.memory.distiller import (
    build_messages,
    call_distiller,
    distiller_kind,
    parse_skill_output,
)
from sesa_graph.memory.queue import FailureQueue
from sesa_graph.memory.skill_checks import check_candidate, question_entities

GOOD = GOOD_SKILLS[0]


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(GOOD),  # bare JSON
        "Here is the skill:\n```json\n"
        + json.dumps(GOOD, indent=2)
        + "\n```\nHope it helps!",  # fenced + prose
        "<think>what went wrong? {not json}</think>"
        + json.dumps(GOOD),  # reasoning model with braces in thoughts
        "{broken " + json.dumps(GOOD),  # junk brace before the object
        json.dumps(
            {
                "skill": GOOD["description"],
                "trigger_condition": GOOD["trigger"],
                "avoidance_cue": GOOD["avoid"],
                "query_templates": GOOD["queries"][0],
                "category": "temporal",
            }
        ),  # aliases, queries as a string
        "Description: {d}\nTrigger: {t}\nAvoid: {a}\nQueries: {q}\nCategory: temporal".format(
            d=GOOD["description"], t=GOOD["trigger"], a=GOOD["avoid"], q=GOOD["queries"][0]
        ),  # key: value lines
        "**Description**: {d}\n- **Trigger**: {t}\n- **Avoid**: {a}\n- **Queries**: {q}".format(
            d=GOOD["description"], t=GOOD["trigger"], a=GOOD["avoid"], q=GOOD["queries"][0]
        ),  # markdown bullets
    ],
)
def test_parse_accepts_the_usual_shapes(text):
    fields = parse_skill_output(text)
    assert fields["description"] == GOOD["description"]
    assert fields["trigger"] == GOOD["trigger"] and fields["avoid"] == GOOD["avoid"]
    assert fields["queries"] == GOOD["queries"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "I cannot help with that.",
        "{}",
        '{"trigger": "only a trigger"}',
        "[1, 2, 3]",
        '<think>never closed {"description": "x"}',
        None,
        42,
    ],
)
def test_parse_never_raises_on_garbage(text):
    assert parse_skill_output(text) is None


def _pending(**kw):
    q = FailureQueue(None)
    q.add([failure(7, **kw)])
    return q.pick(1)[0]


def _fields(**over):
    return {**GOOD, "queries": list(GOOD["queries"]), **over}


@pytest.mark.parametrize(
    "fields, reason",
    [
        (None, "unparseable"),
        (_fields(description=""), "empty_description"),
        (_fields(trigger="  "), "empty_trigger"),
        (_fields(avoid=""), "empty_avoid"),
        (_fields(queries=[]), "empty_queries"),
        (_fields(description="x" * 161), "too_long"),  # one field over max_field_chars
        (
            _fields(avoid="word " * 30, trigger="word " * 30),
            "too_long",
        ),  # all fields together over max_skill_chars
        (
            _fields(
                description="Search carefully and check the results.",
                trigger="Any question.",
                avoid="Bad searches.",
            ),
            "vacuous",
        ),
        (
            _fields(
                description="Always make sure to find the correct and relevant information first.",
                trigger="When searching.",
                avoid="Wrong answers.",
            ),
            "vacuous",
        ),
    ],
)
def test_check_rejects_with_a_reason(fields, reason):
    skill, why = check_candidate(fields, _pending(), MemoryConfig(), step=3)
    assert skill is None and why == reason


def test_check_rejects_entities_copied_from_the_failing_question_or_answers():
    f = _pending(
        question="Which opera did Richard Strauss compose in 1905?", golds=["Salome"], answer="Elektra"
    )
    assert {"richard", "strauss", "1905", "salome", "elektra"} <= question_entities(
        f.record.question, f.record.golds, f.record.answer
    )
    for copied in (
        {"description": "Search the Strauss catalogue of operas by year of premiere first."},
        {"queries": ["[composer] operas 1905"]},
        {"avoid": "Answering Elektra when a different opera was asked."},
        {"queries": ["[Richard Strauss] operas"]},
    ):  # brackets do not hide a copied name
        skill, why = check_candidate(_fields(**copied), f, MemoryConfig(), step=3)
        assert why == "copies_entities", copied
    skill, why = check_candidate(_fields(), f, MemoryConfig(), step=3)
    assert why is None and skill.source == "distilled" and skill.created_step == 3
    assert skill.source_failures == [f.key] and skill.id.startswith("d-")


def test_question_openers_and_yes_no_are_not_entities():
    ents = question_entities(
        "Name the river that flows through the capital. Are both cities coastal?", ["yes"]
    )
    assert ents == set()


def test_distiller_messages_show_the_skills_that_did_not_help():
    from sesa_graph.memory.skill import load_seeds

    seeds = load_seeds()[1]
    msgs = build_messages(_pending(skills=[seeds[0].id]), [seeds[0]])
    assert msgs[0]["role"] == "system" and "JSON" in msgs[0]["content"]
    user = msgs[1]["content"]
    assert "war number 7" in user and "Treaty 7" in user and "did not help" in user
    assert seeds[0].description[:40] in user


def test_call_distiller_with_a_policy_client_batches_and_reports_errors():
    convs = [build_messages(_pending(), [])] * 3
    ok = ScriptedDistiller(lambda q, u: "x")
    assert asyncio.run(call_distiller(ok, convs, MemoryConfig())) == ["x", "x", "x"]
    assert len(ok.calls) == 1 and len(ok.calls[0]) == 3  # one generate call for the whole pass
    assert ok.calls[0][0].sampling.max_tokens == MemoryConfig().distiller_max_tokens
    out = asyncio.run(call_distiller(ScriptedDistiller(fail=True), convs, MemoryConfig()))
    assert all(isinstance(o, Exception) for o in out)


def test_call_distiller_with_a_langchain_chat_model():
    model = FakeListChatModel(responses=[json.dumps(GOOD), "second"])
    out = asyncio.run(call_distiller(model, [build_messages(_pending(), [])] * 2, MemoryConfig()))
    assert sorted(out) == sorted([json.dumps(GOOD), "second"])
    assert distiller_kind(model) == "chat"
    with pytest.raises(TypeError, match="PolicyClient"):
        distiller_kind(object())
