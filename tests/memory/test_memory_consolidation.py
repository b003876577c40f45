"""Consolidation end to end with a scripted distiller, the real MiniLM and real Chroma.

Includes one test per "better than the reference" item: un-picked failures stay queued; a distiller
error keeps the failures queued and is reported (and a missing distiller is a start-up error); evicted
skills leave tombstones that block re-admission.
"""

import asyncio
import json
import threading

import pytest
from fakes import GOOD_SKILLS, ScriptedDistiller, by_index, failure, skill_json

from sesa_graph.memory import DistillerError, MemoryConfig, SkillMemory
from sesa_graph.memory.bank_layout import SNAPSHOTS


def test_background_consolidation_is_committed_only_at_a_step_boundary(make_memory, tmp_path):
    gate = threading.Event()
    mem = make_memory(ScriptedDistiller(by_index, gate=gate))
    mem.add_failures([failure(i, skills=["seed-dates-exact"]) for i in range(25)])
    questions = ["Who ruled the territory in that period?", "Which club did the player join that season?"]
    before = [[s.id for s in h] for h in mem.retrieve(questions)]

    assert not mem.maybe_consolidate(7)  # not a consolidation step
    assert mem.maybe_consolidate(10)  # every 10 steps with >= 20 pending
    assert not mem.maybe_consolidate(10)  # one at a time
    assert mem.commit(10) is None  # still distilling: nothing to commit yet
    assert mem.version == 0 and [[s.id for s in h] for h in mem.retrieve(questions)] == before

    gate.set()
    rep = mem.commit(11, wait=True, timeout=60)
    assert rep.version == 1 == mem.version and rep.error is None
    assert rep.picked == 25 and rep.responses == 25
    assert len(rep.admitted) == len(GOOD_SKILLS)  # 8 distinct skills
    assert rep.rejected == {"duplicate_pass": 25 - len(GOOD_SKILLS)}  # the rest repeat them
    assert rep.still_queued == 0 and len(mem.bank) == 15 + len(GOOD_SKILLS)
    after = mem.retrieve(questions)
    assert after[0][0].description == GOOD_SKILLS[0]["description"] and after[0][0].created_step == 11
    assert after[1][0].description == GOOD_SKILLS[1]["description"]

    report = json.loads((tmp_path / "mem" / SNAPSHOTS / "v0001.report.json").read_text())
    assert report["admitted"] == 8 and report["rejected"] == {"duplicate_pass": 17}
    assert len((tmp_path / "mem" / SNAPSHOTS / "v0001.jsonl").read_text().splitlines()) == 23
    # the distiller saw the retrieved skill that did not help
    user = mem.consolidator.client.calls[0][0].messages[-1]["content"]
    assert mem.bank.get("seed-dates-exact").description in user


def test_failures_that_were_not_picked_stay_queued(make_memory):
    """Better than the reference: it clears the whole queue at each consolidation."""
    mem = make_memory(ScriptedDistiller(by_index), max_distill_per_pass=5, consolidate_min_pending=5)
    mem.add_failures(
        [failure(i) for i in range(6)] + [failure(i, skills=["seed-dates-exact"]) for i in range(6, 12)]
    )
    picked = {f.key for f in mem.queue.pick(5)}
    assert all(
        "number 6 " in k
        or "number 7 " in k
        or "number 8 " in k
        or "number 9 " in k
        or "number 10 " in k
        or "number 11 " in k
        for k in picked
    )  # guided ones first
    assert mem.maybe_consolidate(10)
    rep = mem.commit(10, wait=True, timeout=60)
    assert rep.picked == 5 and rep.still_queued == 7
    assert picked.isdisjoint(mem.queue.entries) and len(mem.queue) == 7


def test_distiller_error_keeps_failures_queued_and_is_reported(make_memory):
    """Better than the reference: it loses the snapshot of failures when the distiller fails."""
    mem = make_memory(ScriptedDistiller(fail=True), max_consecutive_distiller_errors=2)
    mem.add_failures([failure(i) for i in range(25)])
    keys = set(mem.queue.entries)
    assert mem.maybe_consolidate(10)
    rep = mem.commit(10, wait=True, timeout=60)
    assert rep.version is None and "unreachable" in rep.error and "127.0.0.1:9" in rep.error
    assert set(mem.queue.entries) == keys and mem.version == 0
    assert mem.bank.stats["distiller_errors"] == 1
    assert mem.maybe_consolidate(20)
    with pytest.raises(DistillerError, match="2 consolidations in a row"):
        mem.commit(20, wait=True, timeout=60)
    assert set(mem.queue.entries) == keys
    mem.consolidator.client = ScriptedDistiller(by_index)  # the endpoint is back
    assert mem.maybe_consolidate(30)
    rep = mem.commit(30, wait=True, timeout=60)
    assert rep.version == 1 and mem.bank.state["consecutive_distiller_errors"] == 0


class HalfBrokenChat:
    """A langchain-style chat model that errors on even-numbered questions."""

    async def ainvoke(self, messages):
        q = messages[-1]["content"]
        n = int(q.split("war number ")[1].split()[0])
        if n % 2 == 0:
            raise TimeoutError("read timed out")
        return type("Msg", (), {"content": skill_json(n)})()


def test_partial_distiller_errors_keep_only_the_errored_failures(make_memory):
    mem = make_memory(HalfBrokenChat())
    mem.add_failures([failure(i) for i in range(20)])
    assert mem.maybe_consolidate(10)
    rep = mem.commit(10, wait=True, timeout=60)
    assert rep.version == 1 and rep.responses == 10 and "10 of 20" in rep.error
    assert sorted(int(k.split("war number ")[1].split()[0]) for k in mem.queue.entries) == list(
        range(0, 20, 2)
    )


def test_a_missing_distiller_is_a_start_up_error(tmp_path, encoder):
    """Better than the reference: an unset distiller/judge credential is never a silently disabled bank."""
    with pytest.raises(ValueError, match="needs a distiller"):
        SkillMemory.create(tmp_path / "m", MemoryConfig(mode="on"), encoder=encoder)
    assert not (tmp_path / "m").exists()
    with pytest.raises(TypeError, match="PolicyClient"):
        SkillMemory.create(tmp_path / "m", MemoryConfig(mode="on"), encoder=encoder, distiller="http://x")
    assert not (tmp_path / "m").exists()


def test_bad_output_is_rejected_with_counted_reasons(make_memory):
    outputs = [
        "total garbage",
        json.dumps({"description": "", "trigger": "t", "avoid": "a", "queries": ["q"]}),
        json.dumps({**GOOD_SKILLS[0], "description": "Search the Treaty archive first for war dates."}),
        json.dumps(
            {
                **GOOD_SKILLS[0],
                "description": "Search carefully and check results.",
                "trigger": "Any question.",
                "avoid": "Bad results.",
            }
        ),
    ]
    mem = make_memory(
        ScriptedDistiller(lambda q, u: outputs[int(q.split("number ")[1].split()[0]) % 4]),
        consolidate_min_pending=4,
    )
    mem.add_failures([failure(i) for i in range(4)])
    assert mem.maybe_consolidate(10)
    rep = mem.commit(10, wait=True, timeout=60)
    assert rep.admitted == [] and rep.version == 1
    assert rep.rejected == {"unparseable": 1, "empty_description": 1, "copies_entities": 1, "vacuous": 1}
    assert len(mem.queue) == 0  # answered failures are consumed even when rejected
    assert mem.bank.stats["rejected_copies_entities"] == 1


def _hurt(mem, sid, n=3):
    mem.apply_outcomes([([sid], False, "answered")] * n)


def test_evicted_skills_leave_tombstones_that_block_readmission(make_memory, tmp_path, encoder):
    """Better than the reference: an evicted skill's near-duplicate is not re-admitted right away."""
    dist = ScriptedDistiller(lambda q, u: skill_json(0))  # always proposes the same skill
    cfg = {"consolidate_min_pending": 1, "tombstone_ttl_steps": 25}
    mem = make_memory(dist, **cfg)
    mem.add_failures([failure(1)])
    mem.maybe_consolidate(10)
    (sid,) = mem.commit(10, wait=True, timeout=60).admitted
    _hurt(mem, sid)  # retrieved 3x, helpful - hurt = -3
    _hurt(mem, "seed-dates-exact", 5)  # seeds are never evicted

    mem.add_failures([failure(2)])
    mem.maybe_consolidate(20)
    rep = mem.commit(20, wait=True, timeout=60)
    assert rep.evicted == {sid: "negative_utility"}
    assert rep.rejected == {"duplicate_bank": 1}  # checked against the pre-commit bank
    assert sid not in mem.bank and "seed-dates-exact" in mem.bank
    mem.close()

    mem = SkillMemory.open(tmp_path / "mem", MemoryConfig(**cfg), encoder=encoder, distiller=dist)  # survives
    assert mem.bank.state["n_tombstones"] == 1
    mem.add_failures([failure(3)])
    mem.maybe_consolidate(30)
    rep = mem.commit(30, wait=True, timeout=60)
    assert rep.admitted == [] and rep.rejected == {"tombstoned": 1}

    mem.add_failures([failure(4)])
    mem.maybe_consolidate(50)  # 30 steps after the eviction: the tombstone expired
    rep = mem.commit(50, wait=True, timeout=60)
    assert rep.admitted == [sid] and mem.bank.state["n_tombstones"] == 0
    mem.close()


def test_cap_keeps_the_best_and_fresh_candidates_compete(make_memory):
    mem = make_memory(ScriptedDistiller(by_index), bank_cap=18, consolidate_min_pending=1)
    mem.add_failures([failure(i) for i in range(2)])
    mem.maybe_consolidate(10)
    first = mem.commit(10, wait=True, timeout=60).admitted
    assert len(mem.bank) == 17
    mem.apply_outcomes([([first[0]], True, "answered"), ([first[1]], False, "answered")])  # +1 and -1
    mem.add_failures([failure(i) for i in range(2, 4)])
    mem.maybe_consolidate(20)
    rep = mem.commit(20, wait=True, timeout=60)
    # 19 would be one too many: the skill with score -1 goes, both fresh candidates stay
    assert rep.evicted == {first[1]: "over_capacity"} and len(rep.admitted) == 2 and len(mem.bank) == 18
    assert first[0] in mem.bank


def test_state_survives_a_restart(make_memory, tmp_path, encoder):
    mem = make_memory(ScriptedDistiller(by_index), consolidate_min_pending=3)
    mem.add_failures([failure(i) for i in range(3)])
    mem.maybe_consolidate(10)
    admitted = mem.commit(10, wait=True, timeout=60).admitted
    mem.apply_outcomes([(admitted[:1], True, "answered")])
    mem.add_failures([failure(i, step=11) for i in range(5, 9)])
    snapshot = {s.id: s.model_dump() for s in mem.bank.skills()}
    queue = mem.queue.to_json()
    mem.close()
    again = SkillMemory.open(
        tmp_path / "mem",
        MemoryConfig(consolidate_min_pending=3),
        encoder=encoder,
        distiller=ScriptedDistiller(),
    )
    assert again.version == 1
    assert {s.id: s.model_dump() for s in again.bank.skills()} == snapshot
    assert again.queue.to_json() == queue
    again.close()


def test_end_step_runs_the_boundary_in_order(make_memory):
    mem = make_memory(ScriptedDistiller(by_index))
    r = mem.end_step(
        10,
        outcomes=[(["seed-dates-exact"], True, "answered")],
        failures=[failure(i, skills=["seed-dates-exact"]) for i in range(20)] + [failure(99, correct=True)],
    )
    assert r.outcomes["helpful"] == 1 and r.failures["added"] == 20 and r.failures["skipped_correct"] == 1
    assert r.commit is None and r.consolidation_started
    mem.consolidator._thread.join(60)
    r = mem.end_step(11)
    assert r.commit.version == 1 and not r.consolidation_started


def test_distiller_can_run_on_the_callers_event_loop(make_memory):
    mem = make_memory(ScriptedDistiller(by_index))
    mem.add_failures([failure(i) for i in range(20)])

    async def step_loop():
        mem.consolidator.loop = asyncio.get_running_loop()
        assert mem.maybe_consolidate(10)
        with pytest.raises(RuntimeError, match="deadlock"):
            mem.commit(10, wait=True)
        while not mem.consolidator.done:
            await asyncio.sleep(0.02)  # rollouts would run here; the distiller shares this loop
        return mem.commit(11)

    rep = asyncio.run(step_loop())
    assert rep.version == 1 and len(rep.admitted) == len(GOOD_SKILLS)


# ---- modes -----------------------------------------------------------------------------------------------


def test_static_mode_credits_but_never_distils(make_memory):
    mem = make_memory(mode="static")
    assert mem.add_failures([failure(i) for i in range(30)]) == {"ignored_mode": 30}
    assert not mem.maybe_consolidate(10) and mem.commit(10) is None
    mem.apply_outcomes([(["seed-dates-exact"], True, "answered")] * 4)
    assert (
        mem.bank.get("seed-dates-exact").helpful == 4 and len(mem.retrieve(["When was it founded?"])[0]) == 3
    )


def test_off_mode_has_no_bank(tmp_path, encoder):
    mem = SkillMemory.create(tmp_path / "m", MemoryConfig(mode="off"), encoder=encoder)
    assert mem.retrieve(["a", "b"]) == [[], []] and mem.render([]) == ""
    assert mem.end_step(10, [(["x"], True, "answered")], [failure(1)]).commit is None
    assert not (tmp_path / "m").exists()


def test_placebo_has_the_same_count_and_length_but_unrelated_text(make_memory, encoder):
    static = make_memory(mode="static", name="s")
    placebo = make_memory(mode="placebo", name="p")
    questions = [
        "In what year was the university founded where the physicist taught?",
        "Which of the two rivers is longer?",
        "Who directed the film based on the novel?",
    ]
    real, fake = static.retrieve(questions), placebo.retrieve(questions)
    for q, r, f in zip(questions, real, fake):
        assert len(r) == len(f) == 3
        rb, fb = static.render(r), placebo.render(f)
        assert abs(len(fb) - len(rb)) <= 0.1 * len(rb)  # about as many characters
        assert abs(len(fb.split()) - len(rb.split())) <= 0.2 * len(rb.split())  # and words
        qe = encoder.encode_queries([q])[0]
        sim_real, sim_fake = (
            float((encoder.encode_documents([s.embed_text() for s in x]) @ qe).max()) for x in (r, f)
        )
        assert sim_fake < sim_real  # less related to the question
        assert not {s.id for s in f} & {s.id for s in static.bank.skills()}
    placebo.apply_outcomes([([s.id for s in fake[0]], True, "answered")])
    assert all(s.retrieved == 0 for s in placebo.bank.skills())  # placebo credits nothing
