"""Distiller warm-up examples: the prompt is the real distiller prompt, the target a skill it would admit.

Checked against the real functions (``build_messages``, ``parse_skill_output``, ``check_candidate``) on the
embedded corpus; no model is loaded except in the one slow near-duplicate test (the embedded MiniLM).
"""

from __future__ import annotations

import json
import os
import random
import re

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.distiller import build_messages, parse_skill_output
from sesa_graph.memory.queue import FailureRecord, PendingFailure, question_key, skip_reason
from sesa_graph.memory.skill import CATEGORIES, load_seeds
from sesa_graph.memory.skill_checks import check_candidate, question_entities
from sesa_graph.prompts import DISTILLER_NO_ANSWER, render_distiller_system
from training.warmup.distiller_data import MODES, QTYPES, distiller_examples, skill_json
from training.warmup.distiller_failures import make_failure

N = 200
_USER = re.compile(
    r"Question: (?P<question>.*)\nCorrect answer: (?P<golds>.*)\nAgent's answer: (?P<answer>.*)\n"
    r"Agent's searches:\n(?P<searches>(?:- .*\n)+)What those searches returned:\n\(nothing kept\)\n"
    r"Skills it was given, which did not help:\n(?P<skills>[\s\S]*?)\nCompare what the searches returned"
)


@pytest.fixture(scope="module")
def examples():
    return distiller_examples(N, seed=0)


def failure_of(ex):
    """The failure and unhelpful seeds, read back from the example's user message (independently of the
    generator), so that ``build_messages`` and ``check_candidate`` can be re-run on them."""
    m = _USER.search(ex.messages[1]["content"])
    assert m, ex.messages[1]["content"]
    answer = None if m["answer"] == DISTILLER_NO_ANSWER else m["answer"]
    searches = [line[2:] for line in m["searches"].splitlines()]
    seeds = [s for s in load_seeds()[1] if s.description in m["skills"]]
    seeds.sort(key=lambda s: m["skills"].index(s.description))
    record = FailureRecord(question=m["question"], golds=[m["golds"]], answer=answer, searches=searches)
    return PendingFailure(key=question_key(m["question"]), record=record), seeds


def test_examples_are_well_formed(examples):
    assert len(examples) == N
    system = render_distiller_system(CATEGORIES)
    for ex in examples:
        assert ex.role == "distiller"
        assert ex.kind.startswith("distill_") and ex.hops in (1, 2)
        assert ex.segments == [(ex.target, True)] and ex.final == ex.target and ex.completion == ex.target
        assert [m["role"] for m in ex.messages] == ["system", "user"]
        assert ex.messages[0]["content"] == system
        assert ex.sources == [] and ex.queries == [] and ex.searches == []
    # every question type and failure mode shows up
    cells = {(q, m) for ex in examples for q in QTYPES for m in MODES if ex.kind == f"distill_{q}_{m}"}
    assert len(cells) >= 20
    assert {q for q, _ in cells} == set(QTYPES)
    assert len({m for _, m in cells}) >= 9


def test_messages_are_exactly_build_messages(examples):
    for ex in examples:
        failure, unhelpful = failure_of(ex)
        assert build_messages(failure, unhelpful) == ex.messages
        assert skip_reason(failure.record) is None  # a failure the queue would keep
        assert 1 <= len(failure.record.searches) <= 3
    assert 0 < sum("(none)" not in ex.messages[1]["content"].split("did not help:")[1] for ex in examples) < N


def test_targets_are_one_json_skill_in_the_asked_format(examples):
    keys = ["description", "trigger", "avoid", "queries", "category"]
    for ex in examples:
        obj = json.loads(ex.target)  # the whole completion is one JSON object, nothing else
        assert list(obj) == keys
        assert obj["category"] in CATEGORIES
        assert 1 <= len(obj["queries"]) <= 3 and all(re.search(r"\[[^\]]+\]", q) for q in obj["queries"])
        # the word limits DISTILLER_SYSTEM states
        assert len(obj["description"].split()) <= 25
        assert len(obj["trigger"].split()) <= 15
        assert len(obj["avoid"].split()) <= 12


def test_targets_parse_and_pass_check_candidate(examples):
    config = MemoryConfig()
    for ex in examples:
        fields = parse_skill_output(ex.target)
        assert fields is not None and fields == {**json.loads(ex.target)}
        failure, _ = failure_of(ex)
        skill, reason = check_candidate(fields, failure, config, step=1)
        assert reason is None, (reason, ex.messages[1]["content"], ex.target)
        assert skill is not None and skill.category == fields["category"]


def test_no_entity_of_the_question_reaches_the_skill(examples):
    for ex in examples:
        failure, _ = failure_of(ex)
        r = failure.record
        words = set(re.findall(r"[a-z0-9][a-z0-9'\-]*", ex.target.lower()))
        assert not (question_entities(r.question, r.golds, r.answer) & words), ex.target


def test_skills_are_diverse(examples):
    fields = [parse_skill_output(ex.target) for ex in examples]
    assert len({ex.target for ex in examples}) == N
    assert len({(f["trigger"], f["description"]) for f in fields}) == N  # what the bank embeds
    assert len({f["description"] for f in fields}) >= N // 2
    assert len({f["category"] for f in fields}) >= 6


def test_deterministic_per_seed():
    a, b, c = distiller_examples(12, seed=3), distiller_examples(12, seed=3), distiller_examples(12, seed=4)
    assert [e.target for e in a] == [e.target for e in b]
    assert [e.messages for e in a] == [e.messages for e in b]
    assert [e.messages for e in a] != [e.messages for e in c]


def test_every_grammar_cell_can_produce_a_passing_skill():
    """Each (question type, failure mode) the generator can draw yields skills within the limits."""
    rng, config = random.Random(0), MemoryConfig()
    for qtype in QTYPES:
        seen_modes = set()
        for _ in range(300):
            made = make_failure(qtype, rng)
            if made is None:
                continue
            question, gold, mode, answer, searches = made
            seen_modes.add(mode)
            text, _ = skill_json(qtype, mode, rng)
            fields = parse_skill_output(text)
            failure = PendingFailure(
                key="k",
                record=FailureRecord(question=question, golds=[gold], answer=answer, searches=searches),
            )
            reason = check_candidate(fields, failure, config, step=1)[1]
            assert reason in (None, "copies_entities"), (qtype, mode, reason, text)
        assert "copied" in seen_modes and len(seen_modes) >= 2, (qtype, seen_modes)


@pytest.mark.slow
def test_few_near_duplicates_under_the_admission_threshold(examples):
    """Embedded as the bank embeds them (trigger + description, MiniLM), few pairs exceed admit_max_cosine."""
    import numpy as np

    from tools.encoder import Encoder

    fields = [parse_skill_output(ex.target) for ex in examples]
    emb = Encoder().encode_documents([f"{f['trigger']} {f['description']}" for f in fields])
    sim = emb @ emb.T
    np.fill_diagonal(sim, -1.0)
    threshold = MemoryConfig().admit_max_cosine
    assert int((sim.max(axis=1) > threshold).sum()) <= N // 20  # at most 5% have a near-duplicate
