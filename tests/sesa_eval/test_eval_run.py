"""The eval driver with a scripted policy: records, concurrency, resume, failures, seeds, bank modes."""

import json

import pytest
from eval_fakes import HashEncoder, ListSearch, ScriptedSolver, hedging_misses, write_jsonl
from pydantic import ValidationError

from sesa_eval.harness import EvalError, EvalSettings, RecordStore, evaluate
from sesa_graph.config import SolverConfig
from sesa_graph.policy.base import GenerationResult
from sesa_graph.rollout.judge import Judge


def settings(tmp_path, data_dir, **kw):
    return EvalSettings(name=kw.pop("name", "t"), out_root=tmp_path / "evals", data_dir=data_dir, **kw)


def records(out_dir):
    return [json.loads(line) for line in (out_dir / "records.jsonl").read_text().splitlines()]


async def run(s, policy=None, search=None, judge=None, **kw):
    return await evaluate(
        s, policy=policy or ScriptedSolver(), search=search or ListSearch(), judge=judge or Judge(None), **kw
    )


async def test_records_and_report(tmp_path, data_dir):
    out = await run(settings(tmp_path, data_dir), ScriptedSolver(search_first=True))
    recs = {r["key"]: r for r in records(out.out_dir)}
    assert len(recs) == 7
    r = recs["alpha/a3/off/greedy"]
    assert (r["question"], r["golds"], r["prediction"]) == (
        "Author of Hamlet? answer: William Shakespeare",
        ["Shakespeare", "William Shakespeare"],
        "William Shakespeare",
    )
    assert (r["em"], r["f1"], r["score"], r["correct"], r["judge_method"]) == (1.0, 1.0, 1.0, True, "exact")
    assert (r["status"], r["turns"], r["searches"], r["skill_ids"]) == ("answered", 2, 1, [])
    assert r["queries"] == ["Author of Hamlet? answer: William Shakespeare"]
    assert recs["alpha/a2/off/greedy"]["f1"] == 0.0 and not recs["alpha/a2/off/greedy"]["correct"]
    rep = json.loads((out.out_dir / "report.json").read_text())
    assert rep["datasets"] == ["bamboogle", "alpha"]  # paper datasets first
    judge = rep["metrics"]["judge"]["off"]
    assert judge["alpha"]["mean"] == 50.0 and judge["alpha"]["n"] == 4
    assert judge["bamboogle"]["mean"] == pytest.approx(100 / 3)
    assert judge["mean"]["mean"] == pytest.approx((50 + 100 / 3) / 2)
    assert rep["complete"] and rep["timing"]["computed"] == 7
    md = (out.out_dir / "report.md").read_text()
    assert "| off | 33.3 (3) | 50.0 (4) | 41.7 (7) |" in md
    assert json.loads((out.out_dir / "eval.json").read_text())["identity"]["solver"]["max_turns"] == 10


async def test_questions_run_concurrently(tmp_path, data_dir):
    policy = ScriptedSolver(delay=0.05)
    await run(settings(tmp_path, data_dir, concurrency=4), policy)
    assert policy.max_batch_seen == 4  # four rollouts were waiting on the policy at once


async def test_resume_skips_cached_questions(tmp_path, data_dir):
    p1 = ScriptedSolver()
    await run(settings(tmp_path, data_dir, limit=2), p1)
    assert len(p1.solved) == 4
    p2 = ScriptedSolver()
    out = await run(settings(tmp_path, data_dir, limit=3), p2)
    # only the third question of each dataset is new
    assert sorted(p2.solved) == [
        "Author of Hamlet? answer: William Shakespeare",
        "Chemical symbol of gold? answer: Ag",
    ]
    assert out.run.cached == {"bamboogle": 2, "alpha": 2} and out.run.computed == 2
    assert out.report["timing"]["cached"] == 4 and out.report["complete"]
    p3 = ScriptedSolver()
    out = await run(settings(tmp_path, data_dir, limit=3), p3)
    assert p3.solved == [] and out.run.computed == 0


async def test_torn_last_line_is_dropped_and_rerun(tmp_path, data_dir):
    s = settings(tmp_path, data_dir, datasets=["alpha"], limit=2)
    out = await run(s)
    path = out.out_dir / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1][: len(lines[1]) // 2])  # killed while writing the second record
    p = ScriptedSolver()
    out = await run(s, p)
    assert len(p.solved) == 1 and out.run.computed == 1
    assert len(records(out.out_dir)) == 2 and out.report["complete"]


async def test_dead_endpoint_stops_and_keeps_partial_results(tmp_path, data_dir):
    s = settings(tmp_path, data_dir, concurrency=1)
    out = await run(s, ScriptedSolver(fail_after=3))
    assert "policy endpoint is down" in out.run.aborted and "http://dead:1/v1" in out.run.aborted
    kept = records(out.out_dir)
    assert len(kept) == 3 and not out.report["complete"]
    assert "INCOMPLETE: 3 of 7" in (out.out_dir / "report.md").read_text()
    p = ScriptedSolver()
    out = await run(s, p)  # the endpoint is back: the rest runs, the three are not recomputed
    assert len(p.solved) == 4 and out.report["complete"]


async def test_search_errors_are_retried_not_scored(tmp_path, data_dir):
    s = settings(tmp_path, data_dir, datasets=["alpha"], max_errors=2, concurrency=1)
    out = await run(s, ScriptedSolver(search_first=True), ListSearch(fail=True))
    assert out.run.errors == 3 and "3 rollouts failed" in out.run.aborted
    recs = records(out.out_dir)
    assert {r["status"] for r in recs} == {"error"} and "search_error" in recs[0]["error"]
    assert out.report["metrics"]["judge"]["off"]["alpha"]["errors"] == 3
    assert out.report["metrics"]["judge"]["off"]["alpha"]["mean"] is None  # no scores from failures
    p = ScriptedSolver(search_first=True)
    out = await run(s, p, ListSearch())
    assert len(p.solved) == 4 and out.report["complete"]
    assert out.report["metrics"]["judge"]["off"]["alpha"]["mean"] == 50.0


async def test_rollout_exception_becomes_error_record(tmp_path, data_dir):
    class Broken(ScriptedSolver):
        async def generate(self, requests):
            raise RuntimeError("CUDA out of memory")

    out = await run(settings(tmp_path, data_dir, datasets=["alpha"], max_errors=10), Broken())
    recs = records(out.out_dir)
    assert len(recs) == 4 and all(r["error"] == "RuntimeError: CUDA out of memory" for r in recs)
    assert out.run.aborted is None and not out.report["complete"]


async def test_other_settings_are_not_mixed(tmp_path, data_dir):
    await run(settings(tmp_path, data_dir, limit=1))
    with pytest.raises(
        EvalError,
        match=r"other settings:\n  solver.max_turns: was 10, now 3\nuse another --name, or --overwrite",
    ):
        await run(settings(tmp_path, data_dir, limit=1, solver=SolverConfig(max_turns=3)))
    p = ScriptedSolver()
    out = await run(
        settings(tmp_path, data_dir, limit=1, solver=SolverConfig(max_turns=3)), p, overwrite=True
    )
    assert len(p.solved) == 2 and len(records(out.out_dir)) == 2


async def test_seeds_sample_and_report_std(tmp_path, data_dir):
    flips = iter(["Paris", "Rome"] * 10)

    class Sampler(ScriptedSolver):
        def __init__(self):
            super().__init__(answer=lambda q, u: next(flips) if "France" in q else "x")
            self.sampling = []

        async def generate(self, requests):
            self.sampling += [r.sampling for r in requests]
            return await super().generate(requests)

    p = Sampler()
    out = await run(settings(tmp_path, data_dir, datasets=["alpha"], limit=1, seeds=2, concurrency=1), p)
    assert [(s.temperature, s.seed) for s in p.sampling] == [(1.0, 0), (1.0, 1)]
    assert sorted(r["key"] for r in records(out.out_dir)) == ["alpha/a1/off/0", "alpha/a1/off/1"]
    cell = out.report["metrics"]["judge"]["off"]["alpha"]
    assert (cell["mean"], cell["seeds"], cell["n"]) == (50.0, 2, 1) and cell["std"] == pytest.approx(
        70.71, abs=0.01
    )
    assert "50.0 ± 70.7 (1×2)" in (out.out_dir / "report.md").read_text()


async def test_greedy_by_default(tmp_path, data_dir):
    class Rec(ScriptedSolver):
        def __init__(self):
            super().__init__()
            self.temps = []

        async def generate(self, requests):
            self.temps += [(r.sampling.temperature, r.sampling.seed) for r in requests]
            return await super().generate(requests)

    p = Rec()
    await run(settings(tmp_path, data_dir, datasets=["alpha"], limit=1), p)
    assert p.temps == [(0.0, None)]


@pytest.fixture
def bank(tmp_path):
    from sesa_graph.memory import MemoryConfig, SkillBank
    from sesa_graph.memory.skill import Skill

    extra = [
        Skill(
            id="m-leak",
            description="Who painted the Mona Lisa? answer: Leonardo da Vinci is a known case.",
            trigger="Painting questions.",
            source="mined",
        )
    ]
    b = SkillBank.create(tmp_path / "bank", MemoryConfig(), HashEncoder())
    b.commit(
        step=1, admit=[(s, HashEncoder().encode_documents([s.embed_text()])[0]) for s in extra], evict={}
    )
    b.close()
    return tmp_path / "bank"


async def test_bank_modes_side_by_side(tmp_path, data_dir, bank):
    p = ScriptedSolver()
    s = settings(tmp_path, data_dir, bank_modes=["off", "on", "placebo"], bank=bank)
    out = await run(s, p, encoder=HashEncoder())
    recs = {r["key"]: r for r in records(out.out_dir)}
    assert len(recs) == 21
    assert (
        recs["alpha/a1/off/greedy"]["skill_ids"] == [] and recs["alpha/a1/off/greedy"]["bank_version"] is None
    )
    on, plc = recs["alpha/a1/on/greedy"], recs["alpha/a1/placebo/greedy"]
    assert len(on["skill_ids"]) == 3 and on["bank_version"] == 1
    assert len(plc["skill_ids"]) == 3 and all(i.startswith("placebo-") for i in plc["skill_ids"])
    users = [m[-1]["content"] for m in p.messages.values()]
    assert sum("Search tips that may help" in u for u in users) == 14  # on + placebo, never off
    assert list(out.report["metrics"]["em"]) == ["off", "on", "placebo"]
    h = out.report["hygiene"]["sections"][0]
    assert h["source"].startswith("skill bank") and h["exact"] == 1 and h["hits"][0]["source"] == "m-leak"
    assert not out.report["hygiene"]["clean"]
    assert "EVAL QUESTIONS FOUND" in (out.out_dir / "report.md").read_text()
    again = await run(s, ScriptedSolver(), encoder=HashEncoder())  # same bank: every mode's records reused
    assert again.run.computed == 0 and again.report["timing"]["stale_rerun"] == 0


async def test_a_changed_bank_reruns_only_the_questions_it_gives_other_skills(tmp_path, data_dir, bank):
    from sesa_graph.memory import MemoryConfig, SkillBank
    from sesa_graph.memory.skill import Skill

    s = settings(tmp_path, data_dir, datasets=["alpha"], bank_modes=["off", "on"], bank=bank)
    first = await run(s, encoder=HashEncoder())
    old = {r["key"]: r for r in records(first.out_dir)}
    assert all(len(r["skills_sha"]) == 16 for r in old.values())
    # the bank moves on: a new skill about capitals of countries, which only a1 ("Capital of France?") retrieves
    new = Skill(
        id="m-capitals",
        description="For a capital city of a country, search the country's name and capital together.",
        trigger="Capital of a country? France Paris capital capital capital",
        source="mined",
    )
    b = SkillBank.open(bank, MemoryConfig(), HashEncoder())
    b.commit(step=2, admit=[(new, HashEncoder().encode_documents([new.embed_text()])[0])], evict={})
    b.close()
    p = ScriptedSolver()
    again = await run(s, p, encoder=HashEncoder())
    assert p.solved == ["Capital of France? answer: Paris"]  # a1 in mode on; off and a2-a4 in mode on reused
    recs = {r["key"]: r for r in records(again.out_dir)}
    assert (
        "m-capitals" in recs["alpha/a1/on/greedy"]["skill_ids"]
        and recs["alpha/a1/on/greedy"]["bank_version"] == 2
    )
    assert recs["alpha/a2/on/greedy"] == old["alpha/a2/on/greedy"]
    assert again.report["timing"]["stale_rerun"] == 1 and again.report["timing"]["cached"] == 7
    assert "1 cached ones run again" in (again.out_dir / "report.md").read_text()


async def test_records_without_skills_sha_are_matched_by_skill_ids(tmp_path, data_dir, bank):
    s = settings(tmp_path, data_dir, datasets=["alpha"], limit=2, bank_modes=["on"], bank=bank)
    out = await run(s, encoder=HashEncoder())
    rows = records(out.out_dir)
    for r in rows:  # as written before skills_sha existed; one of them with other skills
        del r["skills_sha"]
    rows[1]["skill_ids"] = ["someone-else"]
    write_jsonl(out.out_dir / "records.jsonl", rows)
    p = ScriptedSolver()
    again = await run(s, p, encoder=HashEncoder())
    assert p.solved == [rows[1]["question"]] and again.report["timing"]["stale_rerun"] == 1


def test_bank_modes_need_a_bank(tmp_path):
    with pytest.raises(ValidationError, match="need a skill bank: pass --bank"):
        EvalSettings(name="x", bank_modes=["off", "on"])
    with pytest.raises(ValidationError, match="Input should be 'closed', 'off', 'on', 'placebo' or 'oracle'"):
        EvalSettings(name="x", bank_modes=["static"])


async def test_failed_judgments_are_rejudged_on_resume(tmp_path, data_dir):
    class JudgePolicy:
        name, tokenizer = "judge", None

        def __init__(self, ok):
            self.ok = ok

        async def generate(self, requests):
            if not self.ok:
                raise TimeoutError("judge down")
            return [GenerationResult("Correct", [], [], [], "eos") for _ in requests]

        def encode_messages(self, m):
            return []

        def encode_text(self, t):
            return []

    s = settings(tmp_path, data_dir, datasets=["alpha"], max_errors=10)
    answer = hedging_misses("Paris", "William Shakespeare")
    out = await run(s, ScriptedSolver(answer), judge=Judge(JudgePolicy(False)))
    methods = sorted(r["judge_method"] for r in records(out.out_dir))
    assert methods == ["exact", "exact", "judge_unavailable", "judge_unavailable"]
    assert out.report["diagnostics"]["off"]["judge_method"]["judge_unavailable"] == 2
    p = ScriptedSolver(answer)
    out = await run(s, p, judge=Judge(JudgePolicy(True)))
    assert p.solved == [] and out.run.rejudged == 2  # judged again, not solved again
    assert (
        out.report["metrics"]["judge"]["off"]["alpha"]["mean"] == 100.0
    )  # the LLM judge accepted both misses
    assert out.report["metrics"]["em"]["off"]["alpha"]["mean"] == 50.0


async def test_target_pool_hygiene(tmp_path, data_dir):
    pool = write_jsonl(
        tmp_path / "pool.jsonl",
        [{"ground_truth": "Au", "sys_question_example": "chemical symbol of gold answer ag"}],
    )
    out = await run(settings(tmp_path, data_dir, target_pool=[str(pool)]))
    (sec,) = out.report["hygiene"]["sections"]
    assert (sec["exact"], sec["normalized"]) == (0, 1)


def test_record_store_rejects_garbage(tmp_path):
    p = tmp_path / "records.jsonl"
    p.write_text('{"key": "a/1/off/greedy"}\n[1, 2]\n')
    with pytest.raises(EvalError, match=r"records.jsonl:2: not a record"):
        RecordStore(p)


async def test_interrupt_keeps_records_and_reports(tmp_path, data_dir):
    import asyncio

    s = settings(tmp_path, data_dir, datasets=["alpha"], concurrency=1)
    task = asyncio.create_task(run(s, ScriptedSolver(delay=0.1)))
    while not (s.out_dir / "records.jsonl").exists():
        await asyncio.sleep(0.02)
    task.cancel()  # what Ctrl-C does to asyncio.run's main task
    with pytest.raises(asyncio.CancelledError):
        await task
    report = json.loads((s.out_dir / "report.json").read_text())
    assert report["aborted"] == "interrupted" and 1 <= report["done"] < 4
    p = ScriptedSolver()
    out = await run(s, p)
    assert len(p.solved) == 4 - report["done"] and out.report["complete"]


def test_retrained_weights_change_the_identity(tmp_path):
    import os

    from sesa_eval.records import weights_fingerprint

    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"x" * 10)
    (d / "config.json").write_text("{}")
    before = EvalSettings(name="x", policy={"model": str(d)}).identity()["weights"]
    (d / "model.safetensors").write_bytes(b"y" * 11)  # a new checkpoint under the same path
    os.utime(d / "model.safetensors", ns=(1, 1))
    assert before and weights_fingerprint(str(d)) != before
    assert weights_fingerprint("Qwen/Qwen3-4B") is None and weights_fingerprint("embedded") is None
