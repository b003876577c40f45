"""Skill record, skill files, config, utility rule, eviction choice and the failure queue (no Chroma)."""

import pytest
from fakes import failure
from pydantic import ValidationError

from sesa_graph.memory import MemoryConfig, Skill
from sesa_graph.memory.queue import FailureQueue, QueueError
from sesa_graph.memory.skill import CATEGORIES, SkillFileError, load_seeds, load_skill_file, write_skill_file
from sesa_graph.memory.utility import Outcome, classify, select_evictions, tally

# ---- config --------------------------------------------------------------------------------------------


def test_config_defaults_are_the_papers_numbers():
    c = MemoryConfig()
    assert (c.top_k, c.queue_cap, c.consolidate_every, c.consolidate_min_pending, c.max_distill_per_pass) == (
        3,
        300,
        10,
        20,
        30,
    )
    assert (c.admit_max_cosine, c.evict_min_retrieved, c.evict_below_score, c.bank_cap) == (0.93, 3, 0, 800)
    assert c.similarity_floor is None and c.mode == "on"
    for name, f in MemoryConfig.model_fields.items():
        assert f.description, f"{name} has no description"


def test_config_rejects_unknown_keys_and_inconsistent_settings():
    with pytest.raises(ValidationError, match="extra"):
        MemoryConfig(topk=3)
    with pytest.raises(ValidationError, match="consolidate_min_pending"):
        MemoryConfig(queue_cap=10, consolidate_min_pending=20)
    with pytest.raises(ValidationError):
        MemoryConfig(mode="sometimes")


# ---- skills and skill files ------------------------------------------------------------------------------


def test_seeds_are_15_permanent_general_skills():
    version, seeds = load_seeds()
    assert version >= 1 and len(seeds) == 15
    assert len({s.id for s in seeds}) == 15
    assert all(s.seed and s.source == "seed" for s in seeds)
    assert {s.category for s in seeds} <= set(CATEGORIES) and "other" not in {s.category for s in seeds}
    for s in seeds:  # short enough that three fit the default prompt block unclipped
        assert max(len(s.description), len(s.trigger), len(s.avoid)) <= 160, s.id


def test_skill_file_round_trip(tmp_path):
    skills = [
        Skill(
            id="m-1",
            description="d one",
            trigger="t",
            avoid="a",
            queries=["q"],
            category="comparison",
            source="mined",
            helpful=5,
            source_failures=["k"],
        )
    ]
    path = write_skill_file(tmp_path / "p.yaml", skills, version=2)
    version, back = load_skill_file(path)
    assert version == 2
    assert back[0].model_dump(exclude={"helpful"}) == skills[0].model_dump(exclude={"helpful"})
    assert back[0].helpful == 0  # a file starts a bank fresh


@pytest.mark.parametrize(
    "text, match",
    [
        ("skills: []", "'version' must be an integer"),  # no version
        ("version: 1\nskills: {}", "a 'skills' list"),  # wrong shape
        ("version: 1\nskills:\n  - id: x\n", "skills\\[0\\] \\(x\\): description"),  # missing field, named
        ("version: 1\nskills:\n  - {id: x, description: d, trigger: t, queries: [a, b, c, d]}", "at most 3"),
        (
            "version: 1\nskills:\n  - {id: x, description: d, trigger: t}\n  - {id: x, description: e, trigger: t}",
            "duplicate id",
        ),
        ("version: [", "not valid YAML"),
    ],
)
def test_bad_skill_files_name_the_file_and_entry(tmp_path, text, match):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(SkillFileError, match=match) as e:
        load_skill_file(p)
    assert str(p) in str(e.value)


def test_unknown_category_becomes_other():
    assert Skill(id="x", description="d", trigger="t", category="Weird Stuff").category == "other"
    assert (
        Skill(id="x", description="d", trigger="t", category="Entity Resolution").category
        == "entity_resolution"
    )


# ---- utility --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "outcome, kind",
    [
        (Outcome(["s"], True, "answered"), "helpful"),  # correct answer
        (Outcome(["s"], False, "answered"), "hurt"),  # substantive wrong answer
        (Outcome(["s"], False, "max_turns"), "neutral"),  # well-formed but no answer given
        (Outcome(["s"], False, "malformed"), "ignored"),  # broken rollout: not the skill's fault
        (Outcome(["s"], True, "malformed"), "ignored"),  # malformed is ignored even if judged correct
        (Outcome(["s"], False, "search_error"), "ignored"),  # the tool broke
    ],
)
def test_classify(outcome, kind):
    assert classify(outcome) == kind


def test_tally_aggregates_a_step_per_skill():
    deltas, kinds = tally(
        [
            (["a", "b"], True, "answered"),
            (["a"], False, "answered"),
            (["a", "a"], False, "max_turns"),  # listed twice in one prompt: counted once
            (["b"], False, "malformed"),
        ]
    )
    assert deltas["a"] == (3, 1, 1) and deltas["b"] == (1, 1, 0)
    assert kinds == {"helpful": 1, "hurt": 1, "neutral": 1, "ignored": 1}


def _s(i, ret=0, help_=0, hurt=0, seed=False, step=0):
    return Skill(
        id=f"s{i}",
        description="d",
        trigger="t",
        retrieved=ret,
        helpful=help_,
        hurt=hurt,
        seed=seed,
        created_step=step,
    )


def test_evictions_negative_utility_needs_three_retrievals_and_spares_seeds():
    skills = [_s(0, 3, 1, 2), _s(1, 2, 0, 2), _s(2, 5, 0, 5, seed=True), _s(3, 3, 1, 1)]
    assert select_evictions(skills, min_retrieved=3, below_score=0, cap=800) == {"s0": "negative_utility"}


def test_evictions_over_capacity_lowest_score_first_and_fresh_candidates_compete():
    skills = [
        _s(0, 9, 5, 1),
        _s(1, 4, 2, 2),
        _s(2, 0, 0, 0, step=10),
        _s(3, 1, 0, 1),
        _s(4, 0, 0, 0, seed=True),
    ]
    out = select_evictions(skills, min_retrieved=3, below_score=0, cap=3)
    # s3 (score -1) first, then among score 0 the one retrieved more often (s1) before the fresh s2
    assert out == {"s3": "over_capacity", "s1": "over_capacity"}


# ---- the failure queue ------------------------------------------------------------------------------------


def test_queue_skips_what_cannot_teach_a_skill():
    q = FailureQueue(None)
    counts = q.add(
        [
            failure(1, correct=True),
            failure(2, status="malformed"),
            failure(3, searches=[]),
            failure(4, status="max_turns"),  # well-formed, searched, no answer: kept
        ]
    )
    assert counts == {
        "skipped_correct": 1,
        "skipped_status_malformed": 1,
        "skipped_no_search": 1,
        "added": 1,
        "dropped": 0,
    }
    assert len(q) == 1


def test_queue_priority_guided_and_frontier_failures_first():
    q = FailureQueue(None, guided_weight=1.0, repeat_weight=0.5)
    # question 1: a group no rollout solved, five failures, the least informative
    q.add(
        [failure(1, group_success_rate=0.0)] * 5
        + [
            failure(2, skills=["seed-x"], group_success_rate=0.0),  # guided: 1.0
            failure(3, group_success_rate=0.6),  # frontier: 4 * 0.6 * 0.4 = 0.96
            failure(4, skills=["seed-x"], group_success_rate=0.4),  # both: 1.96
            failure(5, group_success_rate=0.2),  # 0.64
        ]
    )
    order = [e.record.question for e in q.pick(5)]
    assert [next(i for i in range(1, 6) if f"number {i} " in o) for o in order] == [4, 2, 3, 5, 1]
    e1 = q.entries[next(k for k in q.entries if "number 1 " in k)]
    assert e1.failures == 5 and e1.groups == 1 and q.priority(e1) == 0.0


def test_queue_cap_drops_the_lowest_priority_and_counts_it():
    q = FailureQueue(None, cap=3)
    q.add([failure(1, skills=["s"]), failure(2, skills=["s"]), failure(3, skills=["s"])])
    counts = q.add([failure(4)])  # unguided, new: the lowest priority, dropped itself
    assert counts["dropped"] == 1 and len(q) == 3
    assert not any("number 4 " in k for k in q.entries)
    counts = q.add([failure(5, skills=["s"]), failure(5, skills=["s"])])  # repeated + guided beats the oldest
    assert counts["dropped"] == 1 and any("number 5 " in k for k in q.entries)
    assert not any("number 1 " in k for k in q.entries)
    assert q.stats["dropped"] == 2


def test_queue_pick_does_not_remove_and_persists(tmp_path):
    path = tmp_path / "queue.json"
    q = FailureQueue(path)
    q.add([failure(i) for i in range(5)])
    picked = q.pick(2)
    assert len(picked) == 2 and len(q) == 5
    q.remove([picked[0].key])
    back = FailureQueue.load(path)
    assert len(back) == 4 and back.stats["consumed"] == 1 and back.stats["added"] == 5
    path.write_text("{not json")
    with pytest.raises(QueueError, match=str(path)):
        FailureQueue.load(path)
