"""The trainer jobs in the GPU configs' layout on CPU: the real launcher (``accelerate launch``), 2 gloo ranks
per role, fp32 master weights with bf16 compute, rank-0 publish; only the model (2 layers of 128) and the batch
are shrunk. Learning at the GPU configs' learning rate, a sharded publish, orphans, a dead rank. (Parity of 2 ranks
with 1, now across two nodes: tests/training/test_two_nodes.py.)"""

import os
import signal
import subprocess
import time

import pytest

from tests.training.trainer_harness import (
    PY,
    ROOT,
    commit_step,
    coordinator,
    job_processes,
    make_run,
    rank_pid,
    start_job,
    tiny_policy,
    wait_until,
    weights,
)
from training.ranks import JobStore, Rank
from training.sync import PeerDiedError, SyncDir
from training.trainer_jobs import failure_message

ROLES = ("solver", "proposer")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_policy(tmp_path_factory.mktemp("tiny") / "policy")


def _max_diff(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.mark.slow
def test_gpu_path_learns_at_lr_1e6_ranks_die_with_the_orchestrator_and_a_dead_rank_is_named(tmp_path, model):
    """Two jobs at once, each 2 ranks with fp32 master weights + bf16 compute and AdamW at the GPU configs' lr
    1e-6. The solver's weights published for step 1 (after one update) differ from the start almost everywhere;
    then `sesa train`'s stand-in is killed with SIGKILL while its ranks wait for step 1, and they must all be
    gone within seconds. The proposer's rank 1 is killed mid-run: the job's failure names it and its log."""
    learn = make_run(tmp_path, "learn", model, steps=2, learning_rate=1e-6, trainer_ranks={"solver": 2})
    dies = make_run(tmp_path, "dies", model, trainer_ranks={"proposer": 2})
    orchestrator = subprocess.Popen(["sleep", "600"])
    coords = {"solver": coordinator(learn), "proposer": coordinator(dies)}
    jobs = [
        start_job(learn, "solver", coords["solver"], orchestrator_pid=orchestrator.pid),
        start_job(dies, "proposer", coords["proposer"]),
    ]
    try:
        commit_step(learn, 0, "solver", model, coords["solver"])
        sync = SyncDir(learn)
        wait_until(lambda: coords["proposer"].ready("proposer", 0), 300, "the proposer's publish of step 0")
        os.kill(rank_pid(dies, 1), signal.SIGKILL)
        wait_until(lambda: coords["solver"].ready("solver", 1), 300, "the solver's update of step 0")
        after, start = weights(sync.weights_dir("solver")), weights(model)
        changed = sum(int((after[k] != start[k]).sum()) for k in start)
        total = sum(t.numel() for t in start.values())
        print(f"lr 1e-6, fp32 master + bf16 compute: {changed / total:.2%} of {total} weights changed")
        assert changed / total >= 0.99
        assert len(job_processes(learn)) >= 3  # the launcher and both ranks, waiting for step 1
        orchestrator.send_signal(signal.SIGKILL)
        orchestrator.wait()
        seconds = wait_until(lambda: not job_processes(learn), 30, "ranks left after the orchestrator died")
        print(f"all ranks gone {seconds:.1f}s after the orchestrator's SIGKILL")
        assert jobs[0].wait(10) != 0
        rc = jobs[1].wait(120)
    finally:
        orchestrator.kill()
        for job in jobs:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
    msg = failure_message("proposer", rc, dies / "logs" / "proposer-trainer.log")
    print(msg.splitlines()[0])
    assert rc != 0 and "rank 1 failed" in msg and "proposer-trainer.rank1.log" in msg


def test_a_rank_that_never_joins_is_named_after_the_timeout(tmp_path, monkeypatch):
    from torch.distributed import TCPStore

    launcher = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)  # the agent's store
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(launcher.port))
    log = tmp_path / "logs" / "solver-trainer.log"
    t0 = time.monotonic()
    with pytest.raises(PeerDiedError, match=r"rank\(s\) \[1\] of 2 did not start within 1s.*rank1\.log"):
        JobStore(Rank(0, 2), 5).join("solver", log, timeout_s=1.0, poll_s=0.05)
    assert time.monotonic() - t0 < 5
    JobStore(Rank(1, 2), 5).join("solver", log, timeout_s=1.0)  # rank 0 is there: no wait


@pytest.mark.slow
def test_fsdp2_publish_on_gloo_equals_the_unsharded_model(tmp_path, model):
    proc = subprocess.run(
        [PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1"]
        + ["--master-port", "29577", "tests/training/fsdp2_publish.py", str(model), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "sharded: rank 0 holds" in proc.stdout
    published, start = weights(SyncDir(tmp_path).weights_dir("solver")), weights(model)
    assert sorted(published) == sorted(start)
    assert _max_diff(published, start) == 0.0
