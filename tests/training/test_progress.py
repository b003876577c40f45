"""What a batch log of ``sesa train`` shows: one flushed line per committed step when stdout is not a terminal,
and ``metrics.jsonl`` with one line per step (a probe result follows its step as its own record kind)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from training.metrics_log import append_record, read_metrics
from training.progress import step_line

ROOT = Path(__file__).resolve().parents[2]

# step 1's record of a real run (2 steps of the e2e test's tiny config, probe_every 1), as metrics.jsonl holds it
RECORD = {
    "step": 1, "items": 2, "valid_proposals": 0, "valid_rate": 0.0, "reused_groups": 2,
    "invalid_reasons": {"no_question:malformed": 2}, "proposer_reward_mean": -1.0, "solver_reward_mean": 0.0,
    "solver_success_rates": [0.0, 0.0], "frontier_groups": 0, "solver_status": {"malformed": 4},
    "search_errors": 0, "judge_unavailable": 0, "judge_methods": {"none": 4},
    "proposals_by_hops": {"1": {"valid": 0, "total": 1}, "2": {"valid": 0, "total": 1}},
    "proposal_searches": {"0": 2}, "turns_cut_by_turn_cap": {"proposer": 4, "solver": 7}, "failures": 0,
    "resampled_groups": 1, "batch_frontier_groups": 0, "bank_size": 15, "bank_version": 0, "queue": 0,
    "consolidation_started": False, "seconds": 30.33, "policy_versions": {"proposer": 1, "solver": 1},
    "time": 1796228396.6309981, "wait_trainers_s": 3.63, "weight_sync_s": {"proposer": 1.54, "solver": 2.025},
    "updates": {
        "proposer": {"loss": 0.0, "grad_norm": 0.0, "learning_rate": 1e-06, "entropy": 2.218462824821472,
                     "completions/clipped_ratio": 0.5, "completions/mean_terminated_length": 28.0,
                     "global_step": 1},
        "solver": {"loss": 0.0, "grad_norm": 0.0, "learning_rate": 1e-06, "entropy": 2.7848135232925415,
                   "completions/clipped_ratio": 1.0, "completions/mean_terminated_length": 0.0, "global_step": 1},
    },
}  # fmt: skip
PROBE = {
    "dataset": "probe",
    "questions": 2,
    "off": {"em": 0.0, "n": 2},
    "on": {"em": 50.0, "n": 2},
    "seconds": 33.8,
}


def test_a_step_line_holds_what_a_batch_log_reader_needs():
    line = step_line({**RECORD, "probe": PROBE}, steps=2, elapsed_s=257.4)
    assert "\n" not in line
    assert line.startswith("step 1 (2/2) | 30s, run 4m17s | solver reward +0.00 acc 0.00 | ")
    for part in (
        "proposer reward -1.00 valid 0/2 reused 2",
        "frontier 0 (0)",
        "bank 15 queue 0",
        "loss proposer 0 solver 0",
        "probe EM % bank off/on 0.0/50.0 (34s)",
        "waited for trainers 4s",
    ):
        assert part in line, (part, line)
    first = step_line({**RECORD, "step": 0, "updates": None, "consolidation": {"admitted": 2}}, 4, 61)
    assert "loss" not in first and "consolidation +2" in first


def test_a_model_judge_that_calls_every_miss_correct_is_flagged_on_the_step_line():
    """An endpoint answering "Correct" to anything trained a whole run to exit 0 without a word."""
    agrees = {**RECORD, "judge_methods": {"exact": 4, "llm": 6}, "correct_by": {"exact": 1, "llm": 6}}
    line = step_line(agrees, 2, 60)
    assert "(6 of 7 correct by the model judge) WARNING: the model judge called all 6 misses" in line
    some = {**RECORD, "judge_methods": {"exact": 4, "llm": 6}, "correct_by": {"exact": 1, "llm": 2}}
    few = {**RECORD, "judge_methods": {"exact": 4, "llm": 2}, "correct_by": {"llm": 2}}
    assert "WARNING" not in step_line(some, 2, 60) + step_line(few, 2, 60)


# the printing code of `sesa train` fed real step records by a stand-in orchestrator that then waits as a step
# of a real run does; stdout is a file, as under nohup or Slurm
DRIVER = """
import json, sys, time
from training.launch import show_steps

class Orchestrator:
    def run(self, start, alive, on_step):
        for record in json.loads(sys.argv[1]):
            on_step(type("Step", (), {"metrics": record})())
        time.sleep(120)  # the next step: the test reads the log meanwhile, then stops this process

show_steps(Orchestrator(), 0, lambda: None, [], 2, time.time() - 65)
"""


def test_each_committed_step_reaches_a_redirected_log_at_once(tmp_path):
    log = tmp_path / "train.log"
    records = [{**RECORD, "step": 0, "updates": None}, {**RECORD, "probe": PROBE}]
    with open(log, "w") as out:
        p = subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps(records)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            # block-buffered, as a plain `sesa train > log` is (PYTHONUNBUFFERED would hide a missing flush)
            env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"COLUMNS": "80"},
        )
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count("\n") < 2 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
        text = log.read_text()
        assert p.poll() is None, text  # still running: the lines were flushed, not written at exit
    finally:
        p.kill()
        p.wait()
    lines = text.splitlines()
    # no table, no wrapping: a line a step
    assert [ln.split(" | ")[0] for ln in lines] == ["step 0 (1/2)", "step 1 (2/2)"], text
    assert "probe EM % bank off/on 0.0/50.0" in lines[1]


def test_metrics_jsonl_has_one_line_per_step_and_readers_see_the_probe(tmp_path):
    append_record(tmp_path, {"step": 0, "solver_reward_mean": 0.1})
    append_record(tmp_path, {"probe_of": 0, "probe": PROBE})
    append_record(tmp_path, {"step": 1, "solver_reward_mean": 0.2})
    raw = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in raw if "step" in r] == [0, 1]  # counting step lines counts steps
    log = read_metrics(tmp_path)
    assert log.rows[0]["probe"] == PROBE and "probe" not in log.rows[1] and log.others == []
    # a resume from step 0 drops that attempt's step and its probe; a probe of a step never written is kept
    # as a record, not attached
    append_record(tmp_path, {"resume": {"from_step": 0}})
    append_record(tmp_path, {"step": 0, "solver_reward_mean": 0.3})
    append_record(tmp_path, {"probe_of": 5, "probe": PROBE})
    log = read_metrics(tmp_path)
    assert log.rows == [{"step": 0, "solver_reward_mean": 0.3}]
    assert [r for _, r in log.others if "probe_of" in r] == [{"probe_of": 5, "probe": PROBE}]
