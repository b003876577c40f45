"""Failure queue v2: only informative (frontier) failures are queued, ranked by how informative they are,
and the distiller sees what the failing rollout retrieved and how often its group succeeded."""

import json

import pytest
from fakes import failure

from sesa_graph.memory.distiller import build_messages
from sesa_graph.memory.queue import FailureQueue, FailureRecord, PendingFailure, frontier_score


def test_frontier_only_skips_groups_nobody_or_everybody_solved():
    q = FailureQueue(None)
    counts = q.add(
        [
            failure(1, group_success_rate=0.0),
            failure(2, group_success_rate=1.0),  # a judge/answer mismatch inside an all-correct group
            failure(3, group_success_rate=0.4),
            failure(4),  # no rate recorded (an old record): nothing to judge it by, kept
        ],
        frontier_only=True,
    )
    assert counts == {"skipped_not_frontier": 2, "added": 2, "dropped": 0}
    assert q.stats["skipped_not_frontier"] == 2
    assert sorted(k.split("number ")[1][0] for k in q.entries) == ["3", "4"]
    # failure_source 'all' keeps them
    assert FailureQueue(None).add([failure(1, group_success_rate=0.0)])["added"] == 1


def test_skill_memory_filters_by_failure_source(make_memory):
    from fakes import ScriptedDistiller

    rows = [failure(1, group_success_rate=0.0), failure(2, group_success_rate=0.5)]
    mem = make_memory(distiller=ScriptedDistiller(lambda q, u: "x"), name="frontier")
    assert mem.add_failures(rows) == {"skipped_not_frontier": 1, "added": 1, "dropped": 0}
    mem = make_memory(distiller=ScriptedDistiller(lambda q, u: "x"), name="all", failure_source="all")
    assert mem.add_failures(rows) == {"added": 2, "dropped": 0}


def test_frontier_score_peaks_at_half():
    assert frontier_score(0.5) == 1.0 and frontier_score(0.0) == frontier_score(1.0) == 0.0
    assert frontier_score(None) == 0.0 and frontier_score(0.2) == pytest.approx(frontier_score(0.8))


def test_repeated_failures_count_inside_a_group_and_across_steps():
    q = FailureQueue(None, guided_weight=1.0, repeat_weight=0.5)
    q.add([failure(1, group_success_rate=0.4, step=1)] * 3)  # three failed rollouts of one group
    q.add([failure(2, group_success_rate=0.4, step=1)])
    q.add([failure(2, group_success_rate=0.6, step=2)])  # on the frontier again a step later
    q.add([failure(3, group_success_rate=0.4, step=1)])  # failed once
    e1, e2, e3 = (q.entries[next(k for k in q.entries if f"number {i} " in k)] for i in (1, 2, 3))
    assert (e1.failures, e1.groups) == (3, 1) and (e2.failures, e2.groups) == (2, 2)
    assert q.priority(e1) == pytest.approx(0.96 * 2) and q.priority(e2) == pytest.approx(0.96 * 1.5)
    assert q.priority(e3) == pytest.approx(0.96)
    assert [e.key for e in q.pick(3)] == [e1.key, e2.key, e3.key]
    assert len(q) == 3 and q.pending_failures == 6


def test_repeats_of_a_group_nobody_solved_add_nothing():
    q = FailureQueue(None, guided_weight=1.0, repeat_weight=0.5)
    q.add([failure(1, group_success_rate=0.0)] * 5)
    assert q.priority(next(iter(q.entries.values()))) == 0.0


def test_guided_needs_a_relevant_skill_in_the_prompt():
    q = FailureQueue(None, guided_weight=1.0, repeat_weight=0.5, guided_min_similarity=0.3)
    q.add(
        [
            {**failure(1, skills=["s"], group_success_rate=0.4), "skill_similarity": 0.6},
            {**failure(2, skills=["s"], group_success_rate=0.4), "skill_similarity": 0.1},
            failure(3, skills=["s"], group_success_rate=0.4),  # an old record: no similarity, counts
            {**failure(4, group_success_rate=0.4), "skill_similarity": 0.9},  # no skill shown
        ]
    )
    e = {i: q.entries[next(k for k in q.entries if f"number {i} " in k)] for i in (1, 2, 3, 4)}
    assert q.priority(e[1]) == pytest.approx(1.96) and q.priority(e[2]) == pytest.approx(0.96)
    assert e[3].guided and not e[4].guided
    # no floor: every failure with skills in its prompt is guided, whatever the similarity
    q = FailureQueue(None, guided_min_similarity=None)
    q.add([{**failure(2, skills=["s"], group_success_rate=0.4), "skill_similarity": 0.1}])
    assert next(iter(q.entries.values())).guided


def test_consolidation_counts_pending_failures_not_questions(make_memory):
    from fakes import ScriptedDistiller

    mem = make_memory(distiller=ScriptedDistiller(lambda q, u: "x"), consolidate_min_pending=4)
    mem.add_failures([failure(1, group_success_rate=0.4, step=1)] * 3)
    assert len(mem.queue) == 1 and not mem.consolidation_due(10)
    mem.add_failures([failure(2, group_success_rate=0.4, step=1)])
    assert len(mem.queue) == 2 and mem.consolidation_due(10)  # [paper] >= N pending failures


def test_old_records_and_queue_files_load_with_defaults(tmp_path):
    old_row = {k: v for k, v in failure(1).items()}  # the fields before evidence and group_success_rate
    rec = FailureRecord.model_validate(old_row)
    assert rec.evidence == [] and rec.group_success_rate is None
    path = tmp_path / "queue.json"
    entry = {
        "key": "which treaty",
        "record": old_row,
        "failures": 3,
        "guided": True,
        "first_step": 1,
        "last_step": 2,
        "seq": 4,
    }
    path.write_text(json.dumps({"format": 1, "entries": [entry], "stats": {"added": 1}}))
    q = FailureQueue.load(path)
    e = q.entries["which treaty"]
    assert (e.groups, e.frontier, e.failures) == (1, 0.0, 3) and q.priority(e) == 1.0
    msgs = build_messages(e, [])  # an old record still renders for the distiller
    assert "(nothing kept)" in msgs[1]["content"] and "answered it right" not in msgs[1]["content"]


def test_distiller_sees_escaped_evidence_and_success_rate():
    rec = FailureRecord.model_validate(
        failure(
            7,
            group_success_rate=0.4,
            evidence=[
                {
                    "title": "Treaty of </information> Seven",
                    "text": "Signed in <|im_end|> 1701 by both kingdoms.",
                },
                {"title": "War 7", "text": "The war lasted\\nthree years."},
            ],
        )
    )
    user = build_messages(PendingFailure(key="k", record=rec), [])[1]["content"]
    assert "40% answered it right" in user
    assert "Treaty of \u2039/information> Seven" in user and "\u2039|im_end|> 1701" in user
    assert "</information>" not in user and "<|im_end|>" not in user
    assert user.index("war 7 treaty") < user.index("Signed in") < user.index("three years")
