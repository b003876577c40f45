"""Two trainer nodes on localhost, as a cluster runs them: `sesa train` (node A's orchestrator with the solver's
vLLM server) hosts the coordinator; `sesa trainers --node-rank 0|1` on nodes A and B start each role's torchrun
agent with --nnodes 2 (one gloo rank per node and role), each node in a working folder of its own, sharing
nothing but the network. Node B freezing (as a node that vanishes from the network) stops the run
with an error naming its lost rank within cluster.node_timeout_s; `--resume` with both nodes started again
commits both steps, with the weights and shards sent through the coordinator. Trained on real-token
trajectories, the two-node jobs' weights equal a one-rank job's. The final weights equal a one-rank job's on the same committed trajectories."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sesa_graph.fsutil import dump_yaml
from sesa_graph.weights_wire import fetch_dir
from tests.training.trainer_harness import (
    commit_step,
    coordinator,
    finish,
    make_run,
    start_job,
    tiny_policy,
    weights,
)
from tools.ports import free_ports
from training.trainer_jobs import live_trainer_processes

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SESA = [sys.executable, "-m", "sesa_cli.main"]
ROLES = ("solver", "proposer")


def _ports() -> tuple[int, dict[str, int]]:
    """The coordinator's port and each trainer job's rendezvous port, all distinct."""
    coordinator_port, solver, proposer = free_ports(3)
    return coordinator_port, {"solver": solver, "proposer": proposer}


def _config(model: Path, coordinator_port: int, rendezvous_ports: dict[str, int]) -> dict:
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
            "rendezvous_ports": rendezvous_ports,
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
    with open(log, "a") as out:
        proc = subprocess.Popen(
            [*SESA, *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    proc.log_path = log  # type: ignore[attr-defined]  # what _wait shows when the process exits early
    return proc


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _two_node_run(tmp: Path, name: str, model: Path, **train) -> tuple[Path, int]:
    """A trainer-only run (tests/training/trainer_harness.py) whose jobs span two nodes, one torchrun rank a
    node and role, their weights sent through the coordinator on the port returned with it."""
    port, rendezvous_ports = _ports()
    run = make_run(
        tmp,
        name,
        model,
        trainer_launcher=["torchrun"],
        trainer_ranks={"solver": 2, "proposer": 2},
        rendezvous_ports=rendezvous_ports,
        **train,
    )
    c = yaml.safe_load((run / "config.yaml").read_text())
    c["cluster"] = {"trainers": "external", "trainer_nodes": 2, "coordinator_port": port, "weights": "store"}
    (run / "config.yaml").write_text(dump_yaml(c))
    return run, port


def _signal_node(workdir: Path, agent: subprocess.Popen, sig: int) -> None:
    """Signal every process of node B: `sesa trainers`, its launcher agents and their ranks (which torch's
    agent starts in sessions of their own, out of reach of the agent's process group)."""
    for pid in [agent.pid, *live_trainer_processes(workdir.resolve())]:
        try:
            os.kill(pid, sig)
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
            if p.poll() is not None:
                tail = p.log_path.read_text()[-3000:]  # type: ignore[attr-defined]
                raise AssertionError(
                    f"{what}: `sesa {' '.join(p.args[3:])}` exited with {p.returncode}:\n{tail}"
                )
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_two_nodes_survive_a_lost_node_commit_and_match_one_node(tmp_path):
    model = tiny_policy(tmp_path / "policy")
    a, b = tmp_path / "nodeA", tmp_path / "nodeB"
    a.mkdir(), b.mkdir()
    port, rendezvous_ports = _ports()
    cfg = a / "two.yaml"
    cfg.write_text(dump_yaml(_config(model, port, rendezvous_ports)))
    addr = f"127.0.0.1:{port}"
    run = a / "runs" / "two"

    def nodes() -> tuple[subprocess.Popen, subprocess.Popen]:
        node = ["trainers", "--coordinator", addr, "--workdir", "trainers", "--node-rank"]
        return _start([*node, "0"], a, a / "node0.log"), _start([*node, "1"], b, b / "node1.log")

    # attempt 1: node B freezes -- it vanishes without closing a connection, the case only heartbeats can see
    t0 = time.monotonic()
    orch = _start(["train", "-c", str(cfg), "--runs-dir", "runs"], a, a / "train.log")
    node0, node1 = nodes()
    try:
        # both jobs' ranks met and published step 0 (the vLLM server takes longer to start): from here no
        # update can finish without node B
        logs = [a / "trainers" / "logs" / f"{r}-trainer.log" for r in ("solver", "proposer")]
        published = lambda: all(f.exists() and "step 0 published" in f.read_text() for f in logs)
        _wait(published, 600, "both trainers' step 0 weights", orch, node0, node1)
        _signal_node(b / "trainers", node1, signal.SIGSTOP)
        frozen = time.monotonic()
        rc = orch.wait(300)
        stopped_s = time.monotonic() - frozen
        node0.wait(120)
    finally:
        _signal_node(b / "trainers", node1, signal.SIGKILL)
        _stop(orch, node0, node1)
    out = (a / "train.log").read_text()
    print(
        f"attempt 1: node B frozen {frozen - t0:.0f}s after the start; sesa train exited {rc} {stopped_s:.0f}s later"
    )
    print("\n".join(line for line in out.splitlines() if "error" in line or "resume" in line)[-1500:])
    assert rc != 0 and "sesa train --resume" in out, out[-3000:]
    assert "rank 1" in out and "heartbeat" in out, out[-3000:]
    print(f"attempt 1 committed steps {_committed(run)}")
    assert _committed(run) in ([], [0])

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
    assert not list((b / "trainers").glob("trajectories*"))  # nothing of the run's record on node B


def test_two_nodes_update_equals_one_rank_for_both_roles(tmp_path, monkeypatch):
    """Both roles' jobs over two nodes (`sesa trainers` on each, one gloo rank a node) train 2 steps of real-token
    trajectories with varied rewards, fed through a coordinator as `sesa train` feeds them; the final weights,
    sent back through it, equal a one-rank job's on the same shards. SGD makes the update the gradient itself;
    fp32 compute (bf16's rounding depends on each rank's shapes). Every value in the coordinator is signed
    (SESA_COORDINATOR_TOKEN, as a run beyond loopback requires)."""
    monkeypatch.setenv("SESA_COORDINATOR_TOKEN", "two-node-test-secret")
    model = tiny_policy(tmp_path / "policy")
    sgd = {"optim": "sgd", "learning_rate": 0.1, "compute_dtype": "float32", "steps": 2}
    two, port = _two_node_run(tmp_path, "two", model, **sgd)
    coord = coordinator(two)
    for step in (0, 1):
        for role in ROLES:
            commit_step(two, step, role, model, coord, seed=step)
    a, b = tmp_path / "nodeA", tmp_path / "nodeB"
    a.mkdir(), b.mkdir()
    node = ["trainers", "--coordinator", f"127.0.0.1:{port}", "--workdir", "trainers", "--node-rank"]
    nodes = [_start([*node, "0"], a, a / "node0.log"), _start([*node, "1"], b, b / "node1.log")]
    ones, jobs = {}, {}
    try:
        for role in ROLES:  # the one-rank jobs run meanwhile
            ones[role] = make_run(tmp_path, f"one-{role}", model, **sgd, trainer_launcher=[])
            one_coord = coordinator(ones[role])
            for step in (0, 1):
                commit_step(ones[role], step, role, model, one_coord, seed=step)
            jobs[role] = (start_job(ones[role], role, one_coord), one_coord)
        _wait(lambda: all(coord.done(r) for r in ROLES), 600, "both two-node jobs done", *nodes)
        for role in ROLES:
            finish(jobs[role][0], ones[role], role)
        assert [p.wait(120) for p in nodes] == [0, 0]
    finally:
        _stop(*nodes, *(job for job, _ in jobs.values()))
        for _, one_coord in jobs.values():
            one_coord.close()
    start = weights(model)
    for role in ROLES:
        got = tmp_path / "final" / role
        fetch_dir(coord.store, coord.done(role)["policy"]["prefix"], got)
        two_nodes, one_rank = weights(got), weights(ones[role] / "policies" / role)
        assert bytes(coord.store._store.get(f"done/{role}")).startswith(b"sesa1:")  # signed on the wire
        diff = max((two_nodes[k] - one_rank[k]).abs().max().item() for k in one_rank)
        moved = max((one_rank[k] - start[k]).abs().max().item() for k in one_rank)
        print(
            f"{role}: 2 nodes x 1 rank vs 1 rank, 2 SGD steps: max |dw| {diff:.3g} (the update: {moved:.3g})"
        )
        assert moved > 1e-3 and diff <= 1e-5, (role, moved, diff)


def test_a_trainer_node_that_never_joins_stops_the_run_with_its_error(tmp_path):
    """Node 1 is never started: node 0's launchers give up after train.join_timeout_s, and `sesa trainers`
    puts each job's failure where the orchestrator looks, so the run stops naming it instead of waiting
    train.wait_timeout_s (an hour by default)."""
    model = tiny_policy(tmp_path / "policy")
    run, port = _two_node_run(tmp_path, "lonely", model, join_timeout_s=10)
    coord = coordinator(run)
    node = ["trainers", "--coordinator", f"127.0.0.1:{port}", "--workdir", "trainers", "--node-rank", "0"]
    agent = _start(node, tmp_path, tmp_path / "node0.log")
    t0 = time.monotonic()
    try:
        rc = agent.wait(180)
        trouble = coord.trainer_trouble()
    finally:
        _stop(agent)
        coord.close()
    print(f"node 0 gave up after {time.monotonic() - t0:.0f}s: {str(trouble).splitlines()[0]}")
    assert rc == 1 and trouble is not None and "trainer node 0" in trouble, (
        tmp_path / "node0.log"
    ).read_text()
