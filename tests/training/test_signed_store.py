"""SESA_COORDINATOR_TOKEN: the coordinator store's values are signed, so a client of its port cannot forge the
run config, a stop, a shard or a weights path; beyond loopback the token is required, and a trainer node there
needs its own copy of the run config. Real TCPStores on 127.0.0.1."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from torch.distributed import TCPStore

from sesa_graph.cluster_config import ClusterConfig
from tools.errors import UserError
from training.coordinator import Coordinator, TrainerLink, open_store
from training.signed_store import ForgedValueError

FAST = ClusterConfig(heartbeat_s=0.1, node_timeout_s=0.5)


def intruder(c: Coordinator) -> TCPStore:
    """A plain client of the coordinator's port, as anyone who reaches it could open."""
    return TCPStore(
        "127.0.0.1", c.port, is_master=False, wait_for_workers=False, timeout=timedelta(seconds=5)
    )


@pytest.fixture
def signed(monkeypatch):
    monkeypatch.setenv("SESA_COORDINATOR_TOKEN", "s3cret-shared-by-the-nodes")
    c = Coordinator(FAST, "name: test\n", {"run": "/runs/test"})
    yield c
    c.close()


def test_values_round_trip_between_nodes_with_the_token(signed):
    link = TrainerLink(signed.address, "solver", connect_timeout_s=5)
    assert link.config_yaml() == "name: test\n"
    link.ready(0, {"kind": "file", "path": "/runs/test/sync/weights/solver/0", "version": 0})
    assert signed.ready("solver", 0)["weights"]["version"] == 0
    raw = bytes(intruder(signed).get("config"))
    assert raw.startswith(b"sesa1:") and raw.endswith(b"name: test\n")  # signed, not hidden


@pytest.mark.parametrize(
    ("key", "forged", "read"),
    [
        # the attacks the review showed: a rewritten config (a launcher that runs /bin/sh), a stop, a weights
        # path of its own choosing
        ("config", "train: {trainer_launcher: [torchrun, --no-python, /bin/sh, -c, id]}\n", "config_yaml"),
        (
            "ready/solver/0",
            json.dumps({"step": 0, "weights": {"kind": "file", "path": "/tmp/evil"}}),
            "ready",
        ),
        ("error/solver", "stopped by someone else", "trouble"),
    ],
)
def test_a_value_written_by_another_client_is_refused_naming_its_key(signed, key, forged, read):
    intruder(signed).set(key, forged)
    link = TrainerLink(signed.address, "solver", connect_timeout_s=5)
    with pytest.raises(ForgedValueError, match=f"key '{key}' holds a value not signed") as err:
        if read == "config_yaml":
            link.config_yaml()
        elif read == "ready":
            signed.ready("solver", 0)
        else:
            signed.trainer_trouble()
    assert "SESA_COORDINATOR_TOKEN" in str(err.value) and forged not in str(err.value)


def test_a_node_with_another_token_cannot_read_or_be_read(signed, monkeypatch):
    monkeypatch.setenv("SESA_COORDINATOR_TOKEN", "a-different-secret")
    other = TrainerLink(signed.address, "proposer", connect_timeout_s=5)
    with pytest.raises(ForgedValueError, match="key 'config'"):
        other.config_yaml()


def test_beyond_loopback_the_token_and_the_nodes_own_config_are_required(monkeypatch, tmp_path):
    monkeypatch.delenv("SESA_COORDINATOR_TOKEN", raising=False)
    with pytest.raises(UserError, match="not on loopback.*SESA_COORDINATOR_TOKEN"):
        open_store("10.11.12.13", 29530, False, 1.0)  # refused before any connection is tried
    from training.trainer_node import run_node

    with pytest.raises(UserError, match="-c/--config"):
        run_node("10.11.12.13:29530", tmp_path / "node")
