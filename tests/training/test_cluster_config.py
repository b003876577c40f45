"""The `cluster:` section and what is derived from it: refusals that name the key, the resolved weight
transport, the config check between a trainer node and the orchestrator, a node's place, and the launcher
command of a node of a two-node job. Config loading only: no process, no socket."""

from __future__ import annotations

import pytest

from sesa_graph.config import ConfigError, load_config
from tools.errors import UserError
from training.trainer_jobs import Node, launcher_command
from training.trainer_node import node_of
from training.trainer_setup import config_differences

EXTERNAL = {"cluster.trainers": "external", "cluster.coordinator_port": 29530}
TWO_NODES = {
    **EXTERNAL,
    "cluster.trainer_nodes": 2,
    "train.trainer_launcher": ["torchrun"],
    "train.trainer_ranks": {"solver": 2, "proposer": 4},
}


def refused(overrides: dict, *keys: str) -> str:
    """The load error's message, checked to name every key in ``keys``."""
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    message = str(err.value)
    for key in keys:
        assert key in message, message
    return message


# ---- validation -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "host"),
    [
        ("cluster.coordinator_host", "10.0.0.1"),
        ("cluster.coordinator_host", "0.0.0.0"),  # every interface, public ones included
        ("cluster.coordinator_host", "node-a"),  # a name resolves to whatever the network says
        ("cluster.main_address", "10.0.0.2"),
    ],
)
def test_a_non_loopback_address_needs_allow_remote(key, host):
    refused({key: host}, key, "cluster.allow_remote")
    cfg = load_config(None, {key: host, "cluster.allow_remote": True})
    assert getattr(cfg.cluster, key.split(".")[1]) == host


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.0.0.2", "::1"])
def test_loopback_addresses_need_no_opt_in(host):
    assert load_config(None, {"cluster.coordinator_host": host}).cluster.coordinator_host == host


def test_external_trainers_need_a_fixed_coordinator_port():
    refused({"cluster.trainers": "external"}, "cluster.trainers", "cluster.coordinator_port")
    assert load_config(None, EXTERNAL).cluster.coordinator_port == 29530


def test_two_trainer_nodes_need_external_trainers():
    refused(
        {**TWO_NODES, "cluster.trainers": "local", "cluster.coordinator_port": None},
        "cluster.trainer_nodes",
        "cluster.trainers",
    )


def test_two_trainer_nodes_need_the_ranks_of_each_job():
    cfg = load_config(None, TWO_NODES)
    assert (cfg.train.ranks("solver"), cfg.train.ranks("proposer")) == (2, 4)
    for role in ("solver", "proposer"):
        other = "proposer" if role == "solver" else "solver"
        given = {other: TWO_NODES["train.trainer_ranks"][other]}
        refused({**TWO_NODES, "train.trainer_ranks": given}, f"train.trainer_ranks.{role}")


def test_ranks_must_divide_among_the_nodes():
    # 3 ranks divide the 3 question groups, but not 2 nodes
    overrides = {
        **TWO_NODES,
        "train.questions_per_step": 3,
        "train.trainer_ranks": {"solver": 3, "proposer": 4},
    }
    refused(overrides, "train.trainer_ranks.solver", "cluster.trainer_nodes")


def test_the_coordinator_port_must_not_be_a_rendezvous_port():
    cfg = load_config()
    for role in ("solver", "proposer"):
        port = cfg.train.rendezvous_ports[role]
        refused(
            {"cluster.coordinator_port": port}, f"train.rendezvous_ports.{role}", "cluster.coordinator_port"
        )


def test_weight_transport_auto_follows_where_the_trainers_run():
    assert load_config().cluster.weight_transport() == "file"  # one machine: the run directory
    assert load_config(None, EXTERNAL).cluster.weight_transport() == "store"  # no shared filesystem assumed
    assert load_config(None, {"cluster.weights": "store"}).cluster.weight_transport() == "store"
    assert load_config(None, {**EXTERNAL, "cluster.weights": "file"}).cluster.weight_transport() == "file"
    assert load_config().cluster.weight_transport(use_vllm=True) == "nccl"  # TRL pushes them itself


def test_nccl_weights_need_trls_vllm_server_mode():
    refused({"cluster.weights": "nccl"}, "cluster.weights", "train.use_vllm")


# ---- a trainer node against the orchestrator ---------------------------------------------------------------
def test_config_differences_name_the_key_and_ignore_the_per_node_addresses():
    ours = load_config(None, {**EXTERNAL, "train.learning_rate": 2e-6})
    theirs = load_config(
        None, {**EXTERNAL, "cluster.allow_remote": True, "cluster.coordinator_host": "10.0.0.1"}
    )
    diff = config_differences(ours, theirs)
    assert len(diff) == 2, diff  # allow_remote differs too: it is the run's opt-in, not a node's address
    (lr,) = [d for d in diff if d.startswith("train.learning_rate:")]
    assert "2e-06 here" in lr and "at the orchestrator" in lr
    assert any(d.startswith("cluster.allow_remote:") for d in diff)
    assert not any("coordinator_host" in d for d in diff)
    assert config_differences(ours, ours) == []


# ---- a node's place ----------------------------------------------------------------------------------------
@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("NODE_RANK", raising=False)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    return monkeypatch


def test_node_of_one_node_defaults_to_node_0_on_loopback(clean_env):
    assert node_of(load_config(None, EXTERNAL).cluster, None, None) == Node(0, 1, "127.0.0.1")


def test_node_of_refuses_a_node_rank_out_of_range_or_missing(clean_env):
    cluster = load_config(None, TWO_NODES).cluster
    assert node_of(cluster, 1, None) == Node(1, 2, "127.0.0.1")
    for bad in (2, -1):
        with pytest.raises(
            UserError, match=rf"--node-rank {bad}: the run has 2 trainer node\(s\) \(0\.\.1\)"
        ):
            node_of(cluster, bad, None)
    with pytest.raises(
        UserError, match=r"2 trainer nodes \(cluster.trainer_nodes\): give --node-rank 0\.\.1"
    ):
        node_of(cluster, None, None)


def test_node_of_takes_the_launchers_environment(clean_env):
    cluster = load_config(None, {**TWO_NODES, "cluster.allow_remote": True}).cluster
    clean_env.setenv("NODE_RANK", "1")
    clean_env.setenv("MASTER_ADDR", "10.0.0.1")
    assert node_of(cluster, None, None) == Node(1, 2, "10.0.0.1")
    # the flags win over the environment, and cluster.main_address over $MASTER_ADDR
    assert node_of(cluster, 0, "10.0.0.9") == Node(0, 2, "10.0.0.9")
    named = load_config(None, {**TWO_NODES, "cluster.allow_remote": True, "cluster.main_address": "10.0.0.5"})
    assert node_of(named.cluster, None, None).main_address == "10.0.0.5"


def test_node_of_refuses_a_remote_main_address_without_allow_remote(clean_env):
    cluster = load_config(None, TWO_NODES).cluster
    with pytest.raises(UserError, match="'10.0.0.1' is not loopback.*cluster.allow_remote"):
        node_of(cluster, 0, "10.0.0.1")
    clean_env.setenv("MASTER_ADDR", "10.0.0.1")  # from the environment: refused all the same
    with pytest.raises(UserError, match="cluster.allow_remote"):
        node_of(cluster, 0, None)


# ---- the launcher command of node 1 of 2 --------------------------------------------------------------------
def test_torchrun_on_the_second_of_two_nodes():
    cfg = load_config(None, TWO_NODES)
    node = Node(1, 2, "10.0.0.1")
    for role, per_node in (("solver", 1), ("proposer", 2)):
        port = cfg.train.rendezvous_ports[role]
        assert launcher_command(cfg, role, node) == [
            _beside("torchrun"),
            *("--nnodes", "2", "--node-rank", "1", "--nproc-per-node", str(per_node)),
            *("--master-addr", "10.0.0.1", "--master-port", str(port)),
            # the other node gets train.join_timeout_s to join, not torch's 600 s
            *("--rdzv-conf", f"timeout={int(cfg.train.join_timeout_s)}"),
        ]


def test_accelerate_on_the_second_of_two_nodes():
    cfg = load_config(None, {**TWO_NODES, "train.trainer_launcher": ["accelerate", "launch"]})
    cmd = launcher_command(cfg, "proposer", Node(1, 2, "10.0.0.1"))
    assert cmd[:2] == [_beside("accelerate"), "launch"] and "--multi_gpu" in cmd

    def flag(name: str) -> str:
        return cmd[cmd.index(name) + 1]

    # accelerate's --num_processes counts every machine's processes, unlike torchrun's per-node count
    assert flag("--num_processes") == "4" and flag("--num_machines") == "2"
    assert flag("--machine_rank") == "1" and flag("--main_process_ip") == "10.0.0.1"
    assert flag("--main_process_port") == str(cfg.train.rendezvous_ports["proposer"])
    assert flag("--rdzv_conf") == f"timeout={int(cfg.train.join_timeout_s)}"


def test_reloaded_servers_on_other_nodes_need_a_coordinator_they_can_reach():
    remote = {"backend": "openai", "base_url": ["http://10.0.0.3:8000/v1"], "reload": True}
    with pytest.raises(ConfigError, match=r"solver_policy.base_url.*cluster.coordinator_host '127.0.0.1'"):
        load_config(None, {"solver_policy": remote})
    ok = {"cluster.coordinator_host": "10.0.0.1", "cluster.allow_remote": True}
    assert load_config(None, {"solver_policy": remote, **ok}).solver_policy.reload
    # servers on this node reach a loopback coordinator
    load_config(None, {"solver_policy": {**remote, "base_url": ["http://127.0.0.1:8000/v1"]}})


def _beside(name: str) -> str:
    """The launcher sesa runs: the one installed beside its interpreter (the venv's)."""
    import sys
    from pathlib import Path

    return str(Path(sys.executable).parent / name)
