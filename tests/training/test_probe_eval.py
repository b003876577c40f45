"""The learning curve's probe evals (training.probe_eval) with a scripted solver, an in-memory search and a
hash-embedded skill bank: which steps are probed, what is written, resume, failures."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sesa_eval"))  # eval_fakes.py

from eval_fakes import HashEncoder, ListSearch, ScriptedSolver, write_jsonl

from sesa_graph.config import JudgeConfig, RunConfig
from sesa_graph.memory.bank import SkillBank
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.policy.factory import make_judge
from tools.errors import UserError
from training.metrics_log import append_record, read_metrics
from training.probe_eval import ProbeEval, probe_dir, probe_steps, spread


@pytest.fixture(autouse=True)
def sesa_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SESA_HOME", str(tmp_path / "sesa_home"))


@pytest.fixture
def probe_file(tmp_path):
    """4 questions, the scripted solver answers 2 right."""
    return write_jsonl(
        tmp_path / "probe-test.jsonl",
        [
            {"id": "p1", "question": "Capital of France? answer: Paris", "golden_answers": ["Paris"]},
            {"id": "p2", "question": "Largest planet? answer: Saturn", "golden_answers": ["Jupiter"]},
            {
                "id": "p3",
                "question": "Author of Hamlet? answer: Shakespeare",
                "golden_answers": ["Shakespeare"],
            },
            {"id": "p4", "question": "Water boils at? answer: 90", "golden_answers": ["100"]},
        ],
    )


def _cfg(probe_file, **train):
    cfg = RunConfig(name="r")
    update = {"steps": 4, "probe_every": 2, "probe_dataset": str(probe_file), **train}
    return cfg.model_copy(update={"train": cfg.train.model_copy(update=update)})


def _run(tmp_path):
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    return run


def _probe(cfg, run, policy=None):
    policy = policy or ScriptedSolver()
    return ProbeEval(
        cfg,
        run,
        policy=policy,
        search=ListSearch(),
        judge=make_judge(JudgeConfig(kind="none"), policy),
        encoder=HashEncoder(),
    )


def _steps(probe, run, steps):
    """What the orchestrator does per step: commit the step's record, then the probe hook."""
    out = {}
    for s in steps:
        record = {"step": s, "items": 2, "valid_rate": 0.5}
        append_record(run, record)
        out[s] = probe.after_step(s, record, policy_version=s, bank_version=1)
    return out


def test_probe_steps_are_the_first_every_kth_and_the_last():
    assert probe_steps(2, 4) == [0, 2, 3]
    assert probe_steps(1, 3) == [0, 1, 2]
    assert probe_steps(5, 3) == [0, 2]
    assert probe_steps(3, 1) == [0]
    assert probe_steps(0, 4) == []


def test_a_limit_takes_questions_evenly_spaced_over_the_set(tmp_path, probe_file):
    assert spread(list(range(330)), 4) == [0, 82, 165, 247]
    assert spread([1, 2], 5) == [1, 2] and spread([1, 2], None) == [1, 2]
    run = _run(tmp_path)
    probe = _steps(_probe(_cfg(probe_file, probe_limit=2, probe_bank_modes=["off"]), run), run, [0])[0]
    assert probe["questions"] == 2 and probe["off"]["n"] == 2
    asked = [json.loads(x)["id"] for x in (run / "probe" / "probe-test.jsonl").read_text().splitlines()]
    assert asked == ["p1", "p3"]


def test_probes_run_at_due_steps_and_write_metrics_and_records(tmp_path, probe_file):
    run = _run(tmp_path)
    # the run's live bank, held open by its writer (as the orchestrator's memory holds it) during the probes
    writer = SkillBank.create(run / "bank", MemoryConfig(), HashEncoder())
    try:
        out = _steps(_probe(_cfg(probe_file), run), run, range(4))
        assert [s for s, p in out.items() if p is not None] == [0, 2, 3]
        by_step = read_metrics(run).by_step
        assert sorted(by_step) == [0, 1, 2, 3]  # still one record per step
        assert "probe" not in by_step[1]
        for s in (0, 2, 3):
            probe = by_step[s]["probe"]
            assert by_step[s]["items"] == 2  # the step's own numbers are kept beside the probe
            assert probe["policy_version"] == s and probe["bank_version"] == 1
            assert probe["questions"] == 4 and "error" not in probe
            for mode in ("off", "on"):  # the fake search only ever finds Paris: 1 answerable question
                assert probe[mode] == {
                    "em": 50.0,
                    "score": 50.0,
                    "n": 4,
                    "errors": 0,
                    "em_answerable": 100.0,
                    "n_answerable": 1,
                }
            assert probe["dir"] == f"probe/step-{s}"
            records = [json.loads(x) for x in (probe_dir(run, s) / "records.jsonl").read_text().splitlines()]
            assert sorted((r["mode"], r["id"]) for r in records) == sorted(
                (m, f"p{i}") for m in ("off", "on") for i in range(1, 5)
            )
            assert {r["id"]: r["em"] for r in records if r["mode"] == "on"} == {
                "p1": 1.0,
                "p2": 0.0,
                "p3": 1.0,
                "p4": 0.0,
            }
        assert not probe_dir(run, 1).exists()
        assert len(writer.skills()) > 0  # the writer's Chroma survived the read-only open and close
    finally:
        writer.close()


def test_resume_skips_a_step_already_probed_and_clears_a_killed_attempt(tmp_path, probe_file):
    run = _run(tmp_path)
    cfg = _cfg(probe_file, probe_bank_modes=["off"])
    _steps(_probe(cfg, run), run, [0])
    lines = (run / "metrics.jsonl").read_text().count("\n")
    again = ScriptedSolver()
    assert _probe(cfg, run, again).after_step(0, {"step": 0}, 0, None) is None
    assert again.calls == 0 and (run / "metrics.jsonl").read_text().count("\n") == lines
    # a probe of step 2 killed half-way: a record made with other weights, no probe in the metrics
    stale = probe_dir(run, 2)
    stale.mkdir(parents=True)
    (stale / "records.jsonl").write_text("not json, a torn line from a kill")
    _steps(_probe(cfg, run), run, [1, 2])
    probe = read_metrics(run).by_step[2]["probe"]
    assert probe["off"]["n"] == 4 and probe["off"]["em"] == 50.0
    assert "torn line" not in (stale / "records.jsonl").read_text()


def test_bank_off_run_probes_mode_off_only(tmp_path, probe_file):
    run = _run(tmp_path)
    cfg = _cfg(probe_file)
    cfg = cfg.model_copy(update={"memory": cfg.memory.model_copy(update={"mode": "off"})})
    (probe,) = [p for p in _steps(_probe(cfg, run), run, [0]).values()]
    assert "off" in probe and "on" not in probe


def test_a_failed_probe_is_recorded_and_training_goes_on(tmp_path, probe_file):
    run = _run(tmp_path)
    dead = ScriptedSolver(fail_after=0)
    probe = _steps(_probe(_cfg(probe_file, probe_bank_modes=["off"]), run, dead), run, [0])[0]
    assert probe is not None
    assert read_metrics(run).by_step[0]["probe"] == probe
    assert probe["complete"] is False and "policy endpoint is down" in probe["aborted"]
    assert probe["off"]["n"] == 0


def test_a_probe_that_raises_is_recorded_as_an_error(tmp_path, probe_file):
    run = _run(tmp_path)
    probe_eval = _probe(_cfg(probe_file, probe_bank_modes=["off"]), run)
    probe_eval.dataset.unlink()  # the run's copy of the questions, gone after the start-up check
    probe = _steps(probe_eval, run, [0])[0]
    assert "DatasetError" in probe["error"] and "off" not in probe
    assert read_metrics(run).by_step[0]["probe"] == probe


def test_a_missing_probe_set_fails_before_training(tmp_path):
    with pytest.raises(UserError, match="probe_every=0"):
        _probe(_cfg(tmp_path / "nope.jsonl"), _run(tmp_path))


def test_the_orchestrator_loop_probes_due_steps_and_mirrors_them_to_the_tracker(tmp_path, probe_file):
    from types import SimpleNamespace

    from training.orchestrator import Orchestrator, StepSummary

    run = _run(tmp_path)
    cfg = _cfg(probe_file, probe_bank_modes=["off"])
    orch = Orchestrator.__new__(Orchestrator)  # no servers: the loop with its steps scripted
    orch.cfg, orch.run_dir, orch.probe = cfg, run, _probe(cfg, run)
    orch.versions, orch.memory = {"proposer": 0, "solver": 0}, SimpleNamespace(version=3)
    tracked = []
    orch.tracker = SimpleNamespace(log_step=tracked.append)
    waited = []

    def wait_ready(step, timeout, alive, replay):  # both trainers are ready at once
        waited.append(step)
        return {r: {"step": step, "weights": {"kind": "file", "path": f"/w/{r}"}} for r in orch.versions}

    orch.coord = SimpleNamespace(wait_ready=wait_ready)
    orch.servers_dead = orch.finish = lambda: None

    def sync_weights(ready):  # the trainers publish version t before step t
        assert set(ready) == {"proposer", "solver"}
        orch.versions["solver"] += 1
        return {}

    def run_step(step, timing=None):
        metrics = {"step": step, "items": 2}
        append_record(run, metrics)
        return StepSummary(step, metrics, 0.1)

    orch.sync_weights, orch.run_step = sync_weights, run_step
    shown = []
    orch.run(0, lambda: None, shown.append)
    assert [s.step for s in shown] == [0, 1, 2, 3] and waited == [0, 1, 2, 3]
    assert [s.step for s in shown if "probe" in s.metrics] == [0, 2, 3]  # the live table sees them too
    assert [(r["step"], r["probe"]["policy_version"]) for r in tracked] == [(0, 1), (2, 3), (3, 4)]
    assert {r["probe"]["bank_version"] for r in tracked} == {3}
    assert all(set(r) == {"step", "probe"} and r["probe"]["off"]["n"] == 4 for r in tracked)
    by_step = read_metrics(run).by_step
    assert [s for s in sorted(by_step) if "probe" in by_step[s]] == [0, 2, 3]


def test_the_run_summary_counts_the_probe_evals_time():
    from training.launch import phase_split
    from training.progress import probe_cell

    rows = [
        {"step": 0, "probe": {"seconds": 12.5, "off": {"em": 5.0}}},
        {"step": 1},
        {"step": 2, "probe": {}},
    ]
    assert phase_split(rows, {})["probe_evals_s"] == 12.5
    assert [probe_cell(r.get("probe")) for r in rows] == ["5.0/-", "", ""]
    assert probe_cell({"error": "EvalError: down"}) == "failed"
