"""The network barrier in one process: the orchestrator's Coordinator and the trainers' TrainerLinks on
127.0.0.1, the weights sent through a store, and a trainer job's own JobStore. No model, no trainer process:
every test runs in well under a few seconds."""

from __future__ import annotations

import gc
import json
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from torch.distributed import TCPStore

from sesa_graph import weights_wire
from sesa_graph.cluster_config import ClusterConfig
from sesa_graph.weights_wire import WeightsWireError, drop, fetch_dir, put_dir
from tools.errors import UserError
from training.coordinator import Coordinator, CoordinatorError, TrainerLink, split_address
from training.ranks import JobStore, Rank
from training.sync import PeerDiedError

FAST = ClusterConfig(heartbeat_s=0.1, node_timeout_s=0.5)  # liveness decided within a second


def no_replay(role: str, step: int):
    raise AssertionError(f"nothing was to be replayed, got {role} step {step}")


def alive() -> None:
    return None


def poll(fn, timeout_s: float, every_s: float = 0.05):
    """``fn()``'s first non-None value within ``timeout_s`` (None if it never came)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (out := fn()) is not None:
            return out
        time.sleep(every_s)
    return None


@pytest.fixture
def coord():
    c = Coordinator(FAST, "name: test\n", {"run": "/runs/test"})
    yield c
    c.close()


@pytest.fixture
def store():
    """A store of the test's own (free port), so key counts are not mixed with a coordinator's."""
    return TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=5))


def link(c: Coordinator, role: str) -> TrainerLink:
    return TrainerLink(c.address, role, connect_timeout_s=5)


# ---- the step barrier -------------------------------------------------------------------------------------
def test_a_trainer_gets_the_run_config_from_the_coordinator(coord):
    solver = link(coord, "solver")
    assert coord.address == f"127.0.0.1:{coord.port}" and coord.port > 0  # port None: a free one
    assert solver.config_yaml() == "name: test\n"
    assert solver.run_info() == {"run": "/runs/test"}


def test_the_step_protocol_ready_commit_and_shard_forgotten(coord):
    solver, proposer = link(coord, "solver"), link(coord, "proposer")
    for lk in (solver, proposer):
        lk.ready(0, {"kind": "file", "path": f"/w/{lk.role}", "version": 0})
    ready = coord.wait_ready(0, 5, alive, no_replay)
    assert ready["solver"] == {"step": 0, "weights": {"kind": "file", "path": "/w/solver", "version": 0}}
    assert ready["proposer"]["weights"]["path"] == "/w/proposer"

    coord.commit(0, {"solver": b"solver rows 0", "proposer": b"proposer rows 0"}, {"step": 0, "items": 2})
    assert solver.wait_commit(0, 5) == b"solver rows 0"
    assert proposer.wait_commit(0, 5) == b"proposer rows 0"
    assert coord.bytes_sent == {"shard/solver": 13, "shard/proposer": 15}

    # a role ready for step 1 has read step 0's shard: the store must not keep every step's trajectories
    assert coord.store.check(["shard/0/solver"])
    solver.ready(1, {"kind": "file", "path": "/w/solver", "version": 1})
    proposer.ready(1, {"kind": "file", "path": "/w/proposer", "version": 1})
    assert set(coord.wait_ready(1, 5, alive, no_replay)) == {"solver", "proposer"}
    for key in ("shard/0/solver", "shard/0/proposer", "ready/solver/0", "ready/proposer/0"):
        assert not coord.store.check([key]), key
    assert coord.store.check(["ready/solver/1"])  # the current step's stays until step 2


def test_a_trainer_resumed_behind_the_orchestrator_gets_the_committed_shards_again(coord):
    """The orchestrator restarted at step 2 (its commits of 0 and 1 are on disk); the solver's checkpoint is at
    step 0: it must train on the recorded steps 0 and 1, not wait for commits that will never come again."""
    replayed = []

    def replay(role: str, step: int):
        replayed.append((role, step))
        return {"step": step}, f"{role} rows {step}".encode()

    proposer, solver = link(coord, "proposer"), link(coord, "solver")
    proposer.ready(2, {"kind": "file", "path": "/w/proposer", "version": 2})
    result = {}
    waiter = threading.Thread(target=lambda: result.update(coord.wait_ready(2, 10, alive, replay)))
    waiter.start()
    for step in (0, 1):
        solver.ready(step, {"kind": "file", "path": "/w/solver", "version": step})
        assert solver.wait_commit(step, 5) == f"solver rows {step}".encode()
    solver.ready(2, {"kind": "file", "path": "/w/solver", "version": 2})
    waiter.join(10)
    assert not waiter.is_alive() and set(result) == {"solver", "proposer"}
    assert replayed == [("solver", 0), ("solver", 1)]  # each once, and none for the proposer


def test_wait_ready_names_a_trainer_that_never_connected(coord):
    link(coord, "proposer").hello({"pid": 1}, FAST.heartbeat_s, FAST.node_timeout_s)
    with pytest.raises(PeerDiedError, match="solver never connected") as err:
        coord.wait_ready(0, 0.3, alive, no_replay)
    assert f"sesa trainers --coordinator {coord.address}" in str(err.value)
    assert "proposer never" not in str(err.value)


def test_wait_ready_ends_when_the_orchestrators_own_check_names_a_dead_process(coord):
    with pytest.raises(PeerDiedError, match="the solver policy server exited.*step 3"):
        coord.wait_ready(3, 5, lambda: "the solver policy server exited", no_replay)


def test_stop_ends_a_trainer_waiting_for_its_commit_with_the_reason(coord):
    solver = link(coord, "solver")
    coord.stop("user interrupt (Ctrl-C)")
    t0 = time.monotonic()
    with pytest.raises(PeerDiedError, match=r"run stopped: user interrupt \(Ctrl-C\).*step 4"):
        solver.wait_commit(4, 30)
    assert time.monotonic() - t0 < 2


def test_wait_commit_times_out_naming_the_step(coord):
    with pytest.raises(TimeoutError, match="step 7's trajectories"):
        link(coord, "solver").wait_commit(7, 0.3)


def test_both_trainers_done_with_a_replay_at_the_end(coord):
    solver, proposer = link(coord, "solver"), link(coord, "proposer")
    proposer.done({"policy": {"kind": "file", "path": "/p/proposer"}})
    # the solver's checkpoint was behind the run's last commit (step 1): it gets that shard while the
    # orchestrator waits for the end
    solver.ready(1, {"kind": "file", "path": "/w/solver", "version": 1})
    replayed = []

    def replay(role: str, step: int):
        replayed.append((role, step))
        solver.done({"policy": {"kind": "file", "path": "/p/solver"}})  # as if it trained on it at once
        return {"step": step}, b"solver rows 1"

    done = coord.wait_done(steps=2, timeout_s=5, alive=alive, replay=replay)
    assert done["solver"] == {"policy": {"kind": "file", "path": "/p/solver"}} and replayed == [("solver", 1)]
    assert coord.store.get("shard/1/solver") == b"solver rows 1"


def test_a_finished_trainers_silence_is_no_trouble(coord):
    solver = link(coord, "solver")
    solver.hello({"pid": 1}, FAST.heartbeat_s, FAST.node_timeout_s)
    solver.beat.stop()  # a finished job exits: its heartbeat stops for good, which is not a lost node
    time.sleep(2 * FAST.heartbeat_s)
    assert coord.trainer_trouble() is None  # the coordinator has seen its last beat
    time.sleep(FAST.node_timeout_s + 2 * FAST.heartbeat_s)
    solver.done({"policy": {"kind": "file", "path": "/p/solver"}})
    assert coord.trainer_trouble() is None


# ---- liveness ---------------------------------------------------------------------------------------------
def test_the_orchestrator_gone_is_noticed_at_once():
    c = Coordinator(FAST, "", {})
    solver = TrainerLink(c.address, "solver", 5)
    assert solver.orchestrator_gone() is None
    c.close()
    del c
    gc.collect()  # the last reference to the master store: its server closes, as when the process dies
    t0 = time.monotonic()
    why = poll(solver.orchestrator_gone, 5)
    # a closed connection, not node_timeout_s (0.5 s here, 30 s by default) of missed heartbeats
    assert why is not None and "the orchestrator at 127.0.0.1:" in why and "is gone" in why
    assert time.monotonic() - t0 < FAST.node_timeout_s


def test_a_trainer_whose_heartbeat_stops_is_named_after_node_timeout(coord):
    solver = link(coord, "solver")
    solver.hello({"pid": 4242}, FAST.heartbeat_s, FAST.node_timeout_s)
    assert poll(coord.trainer_trouble, 1.0) is None  # beating: 1 s > node_timeout_s and no complaint
    solver.beat.stop()
    t0 = time.monotonic()
    trouble = poll(coord.trainer_trouble, 5)
    waited = time.monotonic() - t0
    assert trouble is not None and "the solver trainer job" in trouble and "pid 4242" in trouble
    assert "cluster.node_timeout_s" in trouble and "proposer" not in trouble
    assert FAST.node_timeout_s - FAST.heartbeat_s <= waited < FAST.node_timeout_s + 2


def test_a_trainers_reported_failure_is_the_coordinators_trouble(coord):
    solver = link(coord, "solver")
    assert coord.trainer_trouble() is None
    solver.fail("the solver trainer failed on node-b: OutOfMemoryError")
    assert coord.trainer_trouble() == "the solver trainer failed on node-b: OutOfMemoryError"
    with pytest.raises(PeerDiedError, match="OutOfMemoryError.*step 0"):
        coord.wait_ready(0, 5, alive, no_replay)


# ---- bad addresses ----------------------------------------------------------------------------------------
def test_a_coordinator_port_in_use_names_the_port_and_the_setting(coord):
    with pytest.raises(CoordinatorError) as err:
        Coordinator(ClusterConfig(coordinator_port=coord.port), "", {})
    assert f"127.0.0.1:{coord.port}" in str(err.value) and "cluster.coordinator_port" in str(err.value)


def test_a_wrong_coordinator_address_fails_within_the_connect_timeout():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, not listening: refused, and no one else can take the port meanwhile
        address = f"127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        with pytest.raises(CoordinatorError) as err:
            TrainerLink(address, "proposer", connect_timeout_s=1)
        assert time.monotonic() - t0 < 5  # torch retries once within the timeout; never its 30 min default
    assert address in str(err.value) and "proposer" in str(err.value)


@pytest.mark.parametrize("bad", ["nohost", ":29530", "host:", "host:port", "host:0", "host:65536"])
def test_split_address_refuses(bad):
    with pytest.raises(UserError, match="HOST:PORT"):
        split_address(bad)


def test_split_address():
    assert split_address("node-a.cluster:29530") == ("node-a.cluster", 29530)


# ---- weights through a store ------------------------------------------------------------------------------
def weights_dir(path: Path, payload: bytes) -> Path:
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(payload)
    (path / "config.json").write_text('{"hidden_size": 8}')
    return path


def test_weights_round_trip_replaces_the_previous_directory(tmp_path, store):
    big = bytes(range(256)) * (weights_wire.CHUNK_BYTES // 256) + b"tail"  # two chunks: the last one short
    src = weights_dir(tmp_path / "src", big)
    dest = tmp_path / "weights" / "solver"
    dest.mkdir(parents=True)
    (dest / "stale.safetensors").write_bytes(b"version 0")
    sent = put_dir(store, "weights/solver/3", src, 3)
    assert sent == len(big) + len('{"hidden_size": 8}')
    assert fetch_dir(store, "weights/solver/3", dest) == (3, sent)
    assert sorted(p.name for p in dest.iterdir()) == ["VERSION", "config.json", "model.safetensors"]
    assert (dest / "model.safetensors").read_bytes() == big and (dest / "VERSION").read_text() == "3"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["solver"]  # no .fetch / .old left behind


def test_a_corrupted_chunk_is_refused_and_the_previous_weights_stay(tmp_path, store):
    src = weights_dir(tmp_path / "src", b"new weights" * 100)
    dest = weights_dir(tmp_path / "weights" / "solver", b"old weights")
    put_dir(store, "w/1", src, 1)
    store.set("w/1/model.safetensors/0", b"NEW weights" * 100)  # same size, other bytes
    with pytest.raises(WeightsWireError, match="w/1/model.safetensors.*previous weights stay"):
        fetch_dir(store, "w/1", dest)
    assert (dest / "model.safetensors").read_bytes() == b"old weights"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["solver"]


def test_a_manifest_naming_a_path_outside_the_directory_is_refused(tmp_path, store):
    dest = weights_dir(tmp_path / "weights" / "solver", b"old weights")
    store.set("w/1/../x/0", b"x")
    manifest = {"version": 1, "files": {"../x": {"size": 1, "chunks": 1, "sha256": "0" * 64}}}
    store.set("w/1/manifest", json.dumps(manifest))
    with pytest.raises(WeightsWireError, match="outside the directory"):
        fetch_dir(store, "w/1", dest)
    assert not (tmp_path / "weights" / "x").exists() and not (tmp_path / "x").exists()
    assert (dest / "model.safetensors").read_bytes() == b"old weights"


def test_drop_deletes_every_key_it_sent(tmp_path, store):
    before = store.num_keys()
    src = weights_dir(tmp_path / "src", b"w" * (weights_wire.CHUNK_BYTES + 1))
    put_dir(store, "weights/proposer/2", src, 2)
    assert store.num_keys() == before + 4  # two chunks, one chunk, the manifest
    drop(store, "weights/proposer/2")
    assert store.num_keys() == before
    drop(store, "weights/proposer/2")  # twice (a replay, a retry): nothing left to drop is no error


# ---- a trainer job's own store ----------------------------------------------------------------------------
def test_job_store_hands_rank_0s_value_to_rank_1_and_rank_0_notices_a_silent_rank(monkeypatch, store):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(store.port))
    zero, one = JobStore(Rank(0, 2), 5), JobStore(Rank(1, 2), 5)
    log = Path("/tmp/solver-trainer.log")
    one.store.set("sesa/join/rank1", "node-b pid 77")  # what join() writes, without waiting for rank 0
    zero.join("solver", log, 5)
    assert zero.share("config", "name: run\n") == "name: run\n"
    assert one.share("config", None) == "name: run\n"

    lost: list[str] = []
    for _ in range(3):  # rank 1 beat a little, then its node went away
        one._beats.add("sesa/hb/rank1", 1)
    t0 = time.monotonic()
    zero.watch_peers("solver", FAST.heartbeat_s, FAST.node_timeout_s, lost.append)
    assert poll(lambda: lost[0] if lost else None, 5) is not None
    assert time.monotonic() - t0 >= FAST.node_timeout_s - FAST.heartbeat_s
    assert "the solver trainer's rank 1 (node-b pid 77)" in lost[0] and "node_timeout_s" in lost[0]


def test_job_store_join_names_a_rank_that_never_started(monkeypatch, store):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(store.port))
    with pytest.raises(PeerDiedError, match=r"rank\(s\) \[1\] of 2 did not start.*solver-trainer.rank1.log"):
        JobStore(Rank(0, 2), 5).join("solver", Path("/tmp/solver-trainer.log"), 0.3)


def test_the_coordinator_listens_on_loopback_only(coord):
    """torch's TCPStore server binds every interface whatever host it is given; the coordinator's socket is
    bound to cluster.coordinator_host (127.0.0.1 by default): /proc/net shows 127.0.0.1:PORT, never *:PORT."""
    rows = [
        line.split()
        for table in ("tcp", "tcp6")
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]
    ]
    listening = [r[1] for r in rows if r[3] == "0A" and int(r[1].split(":")[1], 16) == coord.port]
    assert listening == [f"0100007F:{coord.port:04X}"], listening
