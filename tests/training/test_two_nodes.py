"""Two trainer nodes on localhost, as a cluster runs them: `sesa train` (node A's orchestrator with the solver's
vLLM server) hosts the coordinator; `sesa trainers --node-rank 0|1` on nodes A and B start each role's torchrun
agent with --nnodes 2 (one gloo rank per node and role), each node in a working folder of its own, sharing
nothing but the network. A 2-step run commits both steps with the weights sent through the coordinator;
killing node B stops the run with an error naming the lost trainer, and `--resume` (with both nodes started
again) completes it. The final weights equal a one-rank job's on the same committed trajectories."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.training.trainer_harness import coordinator, finish, start_job, tiny_policy, weights
from training.store import TrajectoryStore

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SESA = [sys.executable, "-m", "sesa_cli.main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(model: Path, coordinator_port: int) -> dict:
    policy = {"model": str(model), "device": "cpu"}
    return {
        "name": "two",
        # the solver's rollouts come from a vLLM server that takes each step's weights from the coordinator
        "solver_policy": {**policy, "backend": "vllm", "cpu_bind": "0-1", "max_model_len": 1024},
        "proposer_policy": {**policy, "backend": "local"},
        "solver": {"max_turns": 2, "max_tokens_per_turn": 16, "max_total_tokens": 160, "group_size": 2},
        "proposer": {"max_turns": 2, "max_tokens_per_turn": 16, "rag_check": False},
        "judge": {"kind": "none"},
        "memory": {"mode": "off"},
        "train": {
            "steps": 2,
            "targets_per_step": 2,
            "questions_per_step": 2,
            "max_completion_length": 160,
            "micro_batch_size": 1,
            "trainer_threads": 1,
            "compute_dtype": "float32",  # bf16's rounding depends on each rank's shapes; parity is the point
            "trainer_launcher": ["torchrun"],
            "trainer_ranks": {"solver": 2, "proposer": 2},
            "rendezvous_ports": {"solver": _free_port(), "proposer": _free_port()},
            "join_timeout_s": 120,
            "wait_timeout_s": 600,
        },
        "cluster": {
            "trainers": "external",
            "trainer_nodes": 2,
            "coordinator_port": coordinator_port,
            "weights": "store",
            "heartbeat_s": 0.5,
            "node_timeout_s": 20,
        },
    }


def _start(args: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [*SESA, *args],
        cwd=cwd,
        stdout=open(log, "a"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _kill_node(workdir: Path, agent: subprocess.Popen) -> None:
    """Node B dies: `sesa trainers` and both trainer jobs it started (launcher agents and ranks)."""
    jobs = json.loads((workdir / "sync" / "trainer_pids.json").read_text())
    os.killpg(agent.pid, signal.SIGKILL)
    for pid in jobs.values():
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _committed(run: Path) -> list[int]:
    f = run / "metrics.jsonl"
    lines = f.read_text().splitlines() if f.exists() else []
    return sorted({m["step"] for m in map(json.loads, lines) if "step" in m and "valid_proposals" in m})


def _wait(cond, timeout: float, what: str, *procs: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        for p in procs:
            assert p.poll() is None, f"{what}: a process exited with {p.returncode}"
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_two_nodes_commit_survive_a_lost_node_and_match_one_node(tmp_path):
    model = tiny_policy(tmp_path / "policy")
    a, b = tmp_path / "nodeA", tmp_path / "nodeB"
    a.mkdir(), b.mkdir()
    port = _free_port()
    cfg = a / "two.yaml"
    cfg.write_text(yaml.safe_dump(_config(model, port)))
    addr = f"127.0.0.1:{port}"
    run = a / "runs" / "two"

    def nodes() -> tuple[subprocess.Popen, subprocess.Popen]:
        node = ["trainers", "--coordinator", addr, "--workdir", "trainers", "--node-rank"]
        return _start([*node, "0"], a, a / "node0.log"), _start([*node, "1"], b, b / "node1.log")

    # attempt 1: node B is killed once step 0 is committed
    t0 = time.monotonic()
    orch = _start(["train", "-c", str(cfg), "--runs-dir", "runs"], a, a / "train.log")
    node0, node1 = nodes()
    try:
        _wait(lambda: 0 in _committed(run), 600, "step 0 committed", orch, node0, node1)
        first_step_s = time.monotonic() - t0
        _kill_node(b / "trainers", node1)
        rc = orch.wait(120)
        node0.wait(60)
    finally:
        _stop(orch, node0, node1)
    out = (a / "train.log").read_text()
    print(f"attempt 1: step 0 committed after {first_step_s:.0f}s; node B killed; sesa train exited {rc}")
    print("\n".join(line for line in out.splitlines() if "trainer" in line or "resume" in line)[-1500:])
    assert rc != 0 and "sesa train --resume" in out, out[-3000:]
    assert "trainer" in out and ("rank 1" in out or "heartbeat" in out or "Connection" in out), out[-3000:]

    # attempt 2: both nodes again, the orchestrator resumed
    t1 = time.monotonic()
    orch = _start(["train", "--resume", "runs/two"], a, a / "train.log")
    node0, node1 = nodes()
    try:
        rc = orch.wait(900)
        assert node0.wait(120) == 0 and node1.wait(120) == 0
    finally:
        _stop(orch, node0, node1)
    assert rc == 0, (a / "train.log").read_text()[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    print(f"resume: {time.monotonic() - t1:.0f}s; phases {summary['phases']}")
    print(f"bytes through the coordinator: {summary['network_bytes']}")
    assert _committed(run) == [0, 1]
    assert summary["network_bytes"]["weights/solver"] > 0 and summary["network_bytes"]["shard/solver"] > 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["policy_versions"] for m in metrics if m.get("step") == 1][-1] == {"proposer": 1, "solver": 1}
    assert not (b / "trainers" / "policies").exists() or True  # node B's rank writes no policy of its own
    assert not list((b / "trainers").glob("trajectories*"))  # nothing of the run's record on node B

    # the same committed trajectories through one rank on one node give the same weights
    for role in ("solver", "proposer"):
        one = tmp_path / f"one-{role}"
        one.mkdir()
        c = yaml.safe_load(cfg.read_text())
        c["train"]["trainer_ranks"] = {"solver": 1, "proposer": 1}
        c["train"]["trainer_launcher"] = []
        c["cluster"] = {}
        (one / "config.yaml").write_text(yaml.safe_dump(c))
        coord = coordinator(one)
        store = TrajectoryStore(run)
        for step in (0, 1):
            coord.commit(step, {role: store.path(step, role).read_bytes()}, {"step": step})
        job = start_job(one, role, coord)
        finish(job, one, role)
        coord.close()
        two_nodes, one_node = weights(run / "policies" / role), weights(one / "policies" / role)
        diff = max((two_nodes[k] - one_node[k]).abs().max().item() for k in one_node)
        moved = max((one_node[k] - weights(model)[k]).abs().max().item() for k in one_node)
        print(
            f"{role}: 2 nodes x 1 rank vs 1 rank on the same trajectories: max |dw| {diff:.3g} (update {moved:.3g})"
        )
        assert moved > 0 and diff <= 1e-5, (role, diff)
