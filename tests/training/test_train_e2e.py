"""`sesa train` end to end on the real embedded parts, killed with SIGKILL and resumed."""

import json
import re
import sys
from pathlib import Path

import pytest

from sesa_graph.fsutil import dump_yaml

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

TINY = {
    "name": "e2e",
    # the production topology: a vLLM server per policy, reloaded in place after every step
    "solver_policy": {"model": "embedded", "backend": "vllm", "cpu_bind": "0-1"},
    "proposer_policy": {"model": "embedded", "backend": "vllm", "cpu_bind": "0"},
    "solver": {
        "max_turns": 2,
        "max_tokens_per_turn": 24,
        "max_total_tokens": 192,
        "group_size": 2,
        "doc_chars": 100,
    },
    "proposer": {"max_turns": 2, "max_tokens_per_turn": 24, "rag_check": False},
    "judge": {"kind": "none"},
    "memory": {"mode": "static"},
    "train": {
        "steps": 2,
        "targets_per_step": 2,
        "questions_per_step": 1,
        "max_completion_length": 192,
        "micro_batch_size": 1,  # both trainers accumulate each step's batch over two passes
        "reuse": "frontier",
        "resample_groups": 1,
        "report_to": "tensorboard",
    },
}


def test_killed_server_then_orchestrator_resume_to_a_consistent_end(tmp_path):
    import resume_trials

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(dump_yaml(TINY))
    with open(tmp_path / "log.txt", "w") as log:
        res = resume_trials.trial(
            tmp_path / "runs",
            cfg,
            "e2e",
            steps=3,
            max_delay_s=5,
            seed=0,
            log=log,
            victims=("server", "orchestrator"),
        )
    log_text = (tmp_path / "log.txt").read_text()
    assert res["problems"] == [], (res, log_text[-3000:])
    assert "vLLM server for embedded" in log_text and "exited with code" in log_text  # the crash was named
    # SIGKILL from outside: reported as the kernel's OOM killer would be, with what to lower
    assert "probably killed by the kernel's out-of-memory killer" in log_text and "kv_cache_gib" in log_text
    # stdout is a file: a plain line per committed step, no table (the killed invocations may miss their last)
    assert re.search(r"^step \d \(\d/3\) \| \d+s, run ", log_text, re.MULTILINE), log_text[-3000:]
    assert "frontier batch (all)" not in log_text  # a column of the terminal's table
    run = tmp_path / "runs" / "e2e"
    from training.store import TrajectoryStore

    solver = TrajectoryStore(run).read_all("solver")
    assert len(solver[solver["selected"]]) == 3 * 2  # questions x group per step, each step once
    metrics = {
        m["step"]: m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "step" in m
    }
    for step, m in metrics.items():  # a step short of groups with reward variance ran one more group
        assert (
            solver[solver["step"] == step]["group_id"].nunique() == m["valid_proposals"] + m["reused_groups"]
        ), m
        assert m["batch_frontier_groups"] == 1 or m.get("resampled_groups") == 1, m
    assert any(
        m.get("resampled_groups") for m in metrics.values()
    )  # the untrained 135M rarely splits a group
    assert (run / "summary.json").exists()
    assert not (run / "sync" / "weights").exists()  # a finished run keeps only policies/ and checkpoints/
    for step, m in metrics.items():  # each step after the first ran on the weights its trainers published
        assert m["policy_versions"] == {"proposer": step, "solver": step}, m
    # --report-to tensorboard: both trainers' losses and every committed step's record, across the resumes
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags, xs = {}, {}
    for part in ("solver", "proposer", "selfplay"):
        acc = EventAccumulator(str(run / "tensorboard" / part))
        acc.Reload()
        tags[part] = acc.Tags()["scalars"]
        loss = next((t for t in tags[part] if t.split("/")[-1] == "loss"), None)  # not train_loss
        tag = "selfplay/solver_reward_mean" if part == "selfplay" else loss
        assert tag is not None, tags
        xs[part] = {e.step for e in acc.Scalars(tag)}
    # one x axis: step t's record beside the update that trained on its batch (TRL's global step t+1)
    assert xs["selfplay"] == {s + 1 for s in metrics} == xs["solver"] == xs["proposer"], xs


def test_sigterm_stops_the_trainers_too(tmp_path):
    import signal
    import time

    import resume_trials

    from sesa_graph.policy.vllm_server import owned_processes

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(dump_yaml(TINY))
    run_dir = tmp_path / "runs" / "term"
    with open(tmp_path / "log.txt", "w") as log:
        p = resume_trials._train(
            ["-c", str(cfg), "--runs-dir", str(tmp_path / "runs"), "--name", "term"], stdout=log
        )
        deadline = time.time() + 300
        while (
            (
                len(resume_trials.trainers_alive(run_dir)) < 2
                or len(owned_processes(str(run_dir.resolve()))) < 2
            )
            and time.time() < deadline
            and p.poll() is None
        ):
            time.sleep(0.5)
        assert resume_trials.trainers_alive(run_dir), (tmp_path / "log.txt").read_text()[-2000:]
        time.sleep(5)  # the servers are loading their models
        p.send_signal(signal.SIGTERM)  # the orchestrator only, as `kill PID` would
        assert p.wait(timeout=120) != 0
    time.sleep(1)
    assert resume_trials.trainers_alive(run_dir) == [], (tmp_path / "log.txt").read_text()[-2000:]
    assert owned_processes(str(run_dir.resolve())) == [], (tmp_path / "log.txt").read_text()[-2000:]
