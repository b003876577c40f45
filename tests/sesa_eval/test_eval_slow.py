"""A real eval: 2 Bamboogle questions, the embedded SmolLM2 policy, BM25 over the embedded corpus, EM only.

It uses the real cache root ($SESA_HOME or ~/.cache/sesa) so the converted model and the BM25 index are
built at most once per machine (both are process-safe caches); everything the eval writes goes to tmp_path.
"""

import json
from pathlib import Path

import pytest
from eval_fakes import BENCHMARKS, USER_SESA_HOME

from sesa_eval.harness import EvalSettings, evaluate
from sesa_graph.config import JudgeConfig, SolverConfig
from sesa_graph.model_config import PolicyConfig


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_real_eval_two_bamboogle_questions(tmp_path, monkeypatch):
    if USER_SESA_HOME:
        monkeypatch.setenv("SESA_HOME", USER_SESA_HOME)
    else:
        monkeypatch.delenv("SESA_HOME")
    if not Path(BENCHMARKS, "bamboogle.jsonl").is_file():
        pytest.skip("shared benchmark samples not present")
    s = EvalSettings(
        name="slow",
        out_root=tmp_path / "evals",
        data_dir=BENCHMARKS,
        datasets=["bamboogle"],
        limit=2,
        judge=JudgeConfig(kind="none"),
        solver=SolverConfig(max_turns=2, max_tokens_per_turn=64),
        concurrency=2,
    )
    out = await evaluate(s)
    recs = [json.loads(line) for line in (out.out_dir / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in sorted(recs, key=lambda r: r["id"])] == ["test_108", "test_49"]
    for r in recs:
        assert r["status"] in ("answered", "malformed", "max_turns")
        assert r["golds"] and r["judge_method"] in ("exact", "none")
        assert 1 <= r["turns"] <= 3 and r["model"] == "embedded"  # 2 turns + the final no-search turn
        assert 0.0 <= r["em"] <= r["f1"] <= 1.0 or r["em"] == 1.0
    rep = json.loads((out.out_dir / "report.json").read_text())
    assert rep["complete"] and rep["metrics"]["judge"]["off"]["bamboogle"]["n"] == 2
    assert rep["timing"]["computed"] == 2 and rep["timing"]["questions_per_minute"] > 0
    md = (out.out_dir / "report.md").read_text()
    assert "| mode | Bamboogle | Mean |" in md and "(2)" in md
    again = await evaluate(s)  # everything cached: nothing recomputed
    assert again.run.computed == 0 and again.report["timing"]["cached"] == 2


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_real_eval_bank_on_reruns_only_what_a_new_skill_changes(tmp_path, monkeypatch):
    """Modes off and on over a real Chroma bank with the embedded MiniLM: an unchanged bank reuses every
    record; a skill that the question now retrieves reruns its mode-on record and nothing else."""
    if USER_SESA_HOME:
        monkeypatch.setenv("SESA_HOME", USER_SESA_HOME)
    else:
        monkeypatch.delenv("SESA_HOME")
    if not Path(BENCHMARKS, "bamboogle.jsonl").is_file():
        pytest.skip("shared benchmark samples not present")
    from sesa_graph.memory import MemoryConfig, SkillBank
    from sesa_graph.memory.skill import Skill
    from tools.encoder import Encoder

    enc = Encoder("embedded")
    SkillBank.create(tmp_path / "bank", MemoryConfig(), enc).close()  # the shipped seed skills
    s = EvalSettings(
        name="slow-bank",
        out_root=tmp_path / "evals",
        data_dir=BENCHMARKS,
        datasets=["bamboogle"],
        limit=1,
        bank_modes=["off", "on"],
        bank=tmp_path / "bank",
        judge=JudgeConfig(kind="none"),
        solver=SolverConfig(max_turns=2, max_tokens_per_turn=64),
        concurrency=2,
        # the point is the record cache over a real bank; the vLLM path is the test above (a server start for
        # each of the three evaluations cost 50 s of CI)
        policy=PolicyConfig(backend="local"),
    )
    first = await evaluate(s)
    on = next(
        json.loads(line)
        for line in (first.out_dir / "records.jsonl").read_text().splitlines()
        if json.loads(line)["mode"] == "on"
    )
    assert first.run.computed == 2 and len(on["skill_ids"]) == 3 and on["skills_sha"]
    assert first.report["vs_off"]["judge"]["on"]["bamboogle"]["n"] == 1
    assert (await evaluate(s)).run.computed == 0

    new = Skill(
        id="m-this-question",
        description="Search each entity of the question on its own first.",
        trigger=on["question"],
        source="mined",
    )
    b = SkillBank.open(tmp_path / "bank", MemoryConfig(), enc)
    b.commit(step=1, admit=[(new, enc.encode_documents([new.embed_text()])[0])], evict={})
    b.close()
    again = await evaluate(s)
    assert again.run.computed == 1 and again.report["timing"]["stale_rerun"] == 1
    latest = {
        json.loads(line)["key"]: json.loads(line)
        for line in (again.out_dir / "records.jsonl").read_text().splitlines()
    }
    assert latest[on["key"]]["skill_ids"][0] == "m-this-question" and latest[on["key"]]["bank_version"] == 1
