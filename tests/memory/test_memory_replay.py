"""memory.replay: before admission each candidate's source failure is solved again with the candidate in the
prompt. 'record' keeps the evidence with the skill and counts it; 'require' admits only candidates whose
replay answered right. A scripted replay here (its verdicts are the point), the real MiniLM and Chroma; the
real solver and judge run it in tests/graphs/test_skill_replay.py."""

import json

import pytest
from fakes import GOOD_SKILLS, ScriptedDistiller, by_index, failure

from sesa_graph.memory.bank_layout import SNAPSHOTS
from sesa_graph.memory.skill import SkillReplay


def _replay_right_on_even_questions(calls):
    def replay(pairs):
        calls.append([(s.id, r.question) for s, r in pairs])
        out = []
        for skill, record in pairs:
            right = int(record.golds[0].split()[-1]) % 2 == 0
            out.append(
                SkillReplay(
                    question=record.question,
                    before=record.answer,
                    answer=record.golds[0] if right else "Nowhere Accord",
                    correct=right,
                    status="answered",
                )
            )
        return out

    return replay


@pytest.mark.parametrize("mode", ["off", "record", "require"])
def test_replay_evidence_is_kept_and_required_only_when_asked(make_memory, tmp_path, mode):
    mem = make_memory(ScriptedDistiller(by_index), replay=mode, consolidate_min_pending=8)
    calls = []
    mem.replay = _replay_right_on_even_questions(calls)
    mem.add_failures([failure(i) for i in range(len(GOOD_SKILLS))])
    assert mem.maybe_consolidate(10)
    rep = mem.commit(10, wait=True, timeout=60)
    report = json.loads((tmp_path / "mem" / SNAPSHOTS / "v0001.report.json").read_text())
    distilled = [s for s in mem.bank.skills() if not s.seed]
    if mode == "off":
        assert calls == [] and all(s.replay is None for s in distilled)
        assert len(rep.admitted) == len(GOOD_SKILLS) and "replayed" not in report
        return
    (pairs,) = calls  # one batch per pass: every candidate with its own source failure
    assert len(pairs) == len(GOOD_SKILLS) and len({q for _, q in pairs}) == len(GOOD_SKILLS)
    assert report["replayed"] == len(GOOD_SKILLS) and report["replay_flipped"] == len(GOOD_SKILLS) // 2
    if mode == "record":
        assert len(rep.admitted) == len(GOOD_SKILLS) and "replay_no_flip" not in rep.rejected
    else:
        assert len(rep.admitted) == len(GOOD_SKILLS) // 2
        assert rep.rejected["replay_no_flip"] == len(GOOD_SKILLS) - len(GOOD_SKILLS) // 2
    for skill in distilled:  # the evidence is stored with the skill, in Chroma and in skills.jsonl
        assert skill.replay is not None and skill.replay.before == "Nowhere Accord"
        assert skill.replay.correct == (skill.replay.answer != "Nowhere Accord")
    live = [json.loads(x) for x in (tmp_path / "mem" / "skills.jsonl").read_text().splitlines()]
    assert sum(1 for r in live if r.get("replay")) == len(distilled)
    mem.close()
    from sesa_graph.memory import MemoryConfig, SkillMemory

    again = SkillMemory.open(tmp_path / "mem", MemoryConfig(mode="static"), encoder=mem.bank.encoder)
    assert {s.id: s.replay for s in again.bank.skills() if not s.seed} == {s.id: s.replay for s in distilled}
    again.close()
