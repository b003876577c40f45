"""One owner per run, on a real run: while a tiny `sesa train` (started from a directory outside the project,
with a relative --runs-dir) is training, `sesa train --resume` of it -- by its path and through a symlink -- is
refused naming the holder and touches nothing; the live run finishes all its steps."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sesa_graph.fsutil import dump_yaml
from sesa_graph.owner_lock import process_cmdline
from tests.training.trainer_harness import tiny_policy

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SESA = [sys.executable, "-m", "sesa_cli.main"]


def _config(model: Path) -> dict:
    """The smallest run there is: a 2-layer policy in-process, one question a step, one turn."""
    policy = {"model": str(model), "backend": "local", "device": "cpu"}
    return {
        "name": "own",
        "solver_policy": policy,
        "proposer_policy": dict(policy),  # (a shared dict would be dumped as a YAML alias)
        "solver": {"max_turns": 1, "max_tokens_per_turn": 8, "max_total_tokens": 64, "group_size": 2},
        "proposer": {"max_turns": 1, "max_tokens_per_turn": 8, "max_total_tokens": 64, "rag_check": False},
        "judge": {"kind": "none"},
        "memory": {"mode": "off"},
        "train": {
            "steps": 2,
            "targets_per_step": 2,
            "questions_per_step": 1,
            "max_completion_length": 64,
            "micro_batch_size": 1,
            "trainer_threads": 1,
            "resample_groups": 0,
        },
    }


def _sesa(args: list[str], cwd: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT))
    return subprocess.Popen([*SESA, *args], cwd=cwd, env=env, start_new_session=True, **kw)


def test_a_second_resume_of_a_live_run_is_refused_and_the_run_finishes(tmp_path):
    model = tiny_policy(tmp_path / "model")
    work = tmp_path / "elsewhere"  # not the project: runs/ below resolves here, for the trainers too
    work.mkdir()
    (work / "tiny.yaml").write_text(dump_yaml(_config(model)))
    log = open(tmp_path / "live.log", "w")  # noqa: SIM115 - the child writes it
    live = _sesa(
        ["train", "-c", "tiny.yaml", "--runs-dir", "runs"], work, stdout=log, stderr=subprocess.STDOUT
    )
    run = work / "runs" / "own"
    try:
        pids = run / "sync" / "trainer_pids.json"
        t0 = time.time()
        while not pids.exists() or (run / "sync" / "committed-1.json").exists():
            assert live.poll() is None and time.time() - t0 < 300, (tmp_path / "live.log").read_text()[-3000:]
            time.sleep(0.2)
        trainers = {r: rec["pid"] for r, rec in json.loads(pids.read_text()).items()}
        for pid in trainers.values():  # the trainers got the absolute run directory
            assert str(run.resolve()) in (process_cmdline(pid) or "")
        (tmp_path / "link").symlink_to(run)
        for path in (Path("runs/own"), tmp_path / "link"):
            second = _sesa(
                ["train", "--resume", str(path)],
                work,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            out, err = second.communicate(timeout=120)
            assert second.returncode == 2, (out, err)
            assert f"in use by pid {live.pid}: " in err and "nothing was changed" in err, err
            assert all(process_cmdline(pid) for pid in trainers.values()), "a live trainer was killed"
            assert not (run / "sync" / "STOP.json").exists() and not (run / "superseded").exists()
            assert (
                '"resume"' not in (run / "metrics.jsonl").read_text()
                if (run / "metrics.jsonl").exists()
                else True
            )
        assert live.wait(timeout=300) == 0, (tmp_path / "live.log").read_text()[-3000:]
    finally:
        if live.poll() is None:
            os.killpg(live.pid, signal.SIGKILL)
            live.wait()
        log.close()
    assert sorted(p.name for p in (run / "sync").glob("committed-*.json")) == [
        "committed-0.json",
        "committed-1.json",
    ]
    assert json.loads((run / "summary.json").read_text())["steps"] == 2
    assert (run / "owner.lock").read_text() == ""  # released
