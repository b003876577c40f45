"""Several servers for one model: the client spreads requests by requests in flight within max_concurrency per
replica, a reload reaches every replica and names the one that failed, a dead replica is named, and the
factory starts replicas on their own ports, logs, cores and devices. No server starts here (fakes)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from sesa_graph.model_config import PolicyConfig
from sesa_graph.policy import factory
from sesa_graph.policy.base import GenerationRequest, PolicyUnavailableError

URLS = ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1", "http://127.0.0.1:8003/v1"]


class _Tok:
    def apply_chat_template(self, messages, **kwargs):
        return [1, 2, 3]

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


@pytest.fixture
def no_tokenizer(monkeypatch):
    fake = SimpleNamespace(AutoTokenizer=SimpleNamespace(from_pretrained=lambda *a, **k: _Tok()))
    monkeypatch.setitem(sys.modules, "transformers", fake)


class FakeReplica:
    """A replica's completions endpoint (an httpx transport): records the peak of requests it held at once."""

    def __init__(self, url: str, delay_s: float = 0.02, fail: bool = False) -> None:
        self.url, self.delay_s, self.fail = url, delay_s, fail
        self.served = self.now = self.peak = 0

    async def handle(self, request):
        import httpx

        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(self.delay_s)
            if self.fail:
                raise httpx.ConnectError("refused", request=request)
            self.served += 1
            choice = {
                "text": "7 8",
                "token_ids": [7, 8],
                "logprobs": {"token_logprobs": [-0.1, -0.2]},
                "finish_reason": "stop",
            }
            return httpx.Response(200, json={"choices": [choice]})
        finally:
            self.now -= 1


def _client(urls, replicas, **kw):
    import httpx

    from sesa_graph.policy.openai_client import OpenAIPolicy

    policy = OpenAIPolicy(urls, "m", retries=0, backoff_s=0.01, deadline_s=5.0, **kw)
    by_url = {r.url: r for r in replicas}
    policy._make_client = lambda url: httpx.AsyncClient(transport=httpx.MockTransport(by_url[url].handle))
    return policy


def _burst(policy, n: int):
    async def go():
        return await asyncio.gather(
            *(policy.generate([GenerationRequest(prompt_ids=[1, 2])]) for _ in range(n))
        )

    return asyncio.run(go())


def test_requests_spread_evenly_within_the_per_replica_limit(no_tokenizer):
    replicas = [FakeReplica(u) for u in URLS]
    policy = _client(URLS, replicas, max_concurrency=4)
    out = _burst(policy, 30)
    assert all(r[0].token_ids == [7, 8] for r in out)
    assert [r.served for r in replicas] == [10, 10, 10]
    assert max(r.peak for r in replicas) == 4  # max_concurrency is per replica
    assert policy.base_url == URLS[0] and policy.base_urls == URLS


def test_a_slow_replica_gets_fewer_requests(no_tokenizer):
    replicas = [FakeReplica(URLS[0], delay_s=0.2), FakeReplica(URLS[1], delay_s=0.01)]
    policy = _client(URLS[:2], replicas, max_concurrency=2)

    async def trickle():  # one request at a time arriving while earlier ones run: least in flight wins
        tasks = []
        for _ in range(20):
            tasks.append(asyncio.create_task(policy.generate([GenerationRequest(prompt_ids=[1])])))
            await asyncio.sleep(0.02)
        await asyncio.gather(*tasks)

    asyncio.run(trickle())
    assert replicas[1].served > 2 * replicas[0].served, [r.served for r in replicas]


def test_a_failing_replica_is_named(no_tokenizer):
    replicas = [FakeReplica(URLS[0]), FakeReplica(URLS[1], fail=True)]
    policy = _client(URLS[:2], replicas, max_concurrency=8)
    with pytest.raises(PolicyUnavailableError, match=URLS[1]):
        _burst(policy, 4)


# ---- ServedPolicy over replicas ------------------------------------------------------------------------------


class FakeServer:
    def __init__(self, i: int, reload_error: str | None = None) -> None:
        self.root_url = f"http://127.0.0.1:{8001 + i}"
        self.base_url = self.root_url + "/v1"
        self.spec = SimpleNamespace(served_name="solver", max_model_len=64, token="t")
        self.proc = SimpleNamespace(pid=1000 + i)
        self.exit: str | None = None
        self.reload_error = reload_error
        self.reloaded: list = []
        self.stopped = False

    def dead(self):
        return self.exit

    def reload(self, weights_dir, version=None, expected=None):
        from sesa_graph.policy.weight_check import WeightSyncError

        if self.reload_error:
            raise WeightSyncError(self.reload_error)
        self.reloaded.append((weights_dir, version, expected))
        return {"version": version, "seconds": 0.1}

    def stop(self):
        self.stopped = True


@pytest.fixture
def weights(tmp_path) -> Path:
    import torch
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": torch.ones(4, 2)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def test_served_replicas_reload_each_and_stop_together(no_tokenizer, weights):
    from sesa_graph.policy.vllm_server import ServedPolicy

    servers = [FakeServer(i) for i in range(3)]
    policy = ServedPolicy(servers, tokenizer="m", max_concurrency=8)
    assert policy.server is servers[0] and policy.server.proc.pid == 1000  # what the orchestrator reads
    assert policy.base_urls == [s.base_url for s in servers]
    info = policy.reload(weights, version=5)
    assert info["version"] == 5 and len(info["replicas"]) == 3
    assert all(
        s.reloaded == [(weights, 5, {"embed": 8.0, "embed@bfloat16": 8.0, "embed@float16": 8.0})]
        for s in servers
    )
    assert policy.dead() is None
    servers[
        1
    ].exit = "the vLLM server for solver exited with code -9; last lines of /run/logs/solver-vllm-2.log"
    msg = policy.dead()
    assert msg.startswith("replica 2 of 3 (http://127.0.0.1:8002)") and "solver-vllm-2.log" in msg
    assert policy._gone(1) == msg and policy._gone(0) is None
    policy.close()
    assert all(s.stopped for s in servers)


def test_a_replica_that_misses_the_reload_is_named(no_tokenizer, weights):
    from sesa_graph.policy.vllm_server import ServedPolicy, WeightSyncError

    servers = [FakeServer(0), FakeServer(1, reload_error="serves weights version 4, expected 5")]
    policy = ServedPolicy(servers, tokenizer="m")
    with pytest.raises(WeightSyncError) as err:
        policy.reload(weights, version=5)
    msg = str(err.value)
    assert "1 of 2 replicas" in msg and "mixed weights" in msg
    assert "replica 2 of 2 (http://127.0.0.1:8002): serves weights version 4" in msg


# ---- config and factory -------------------------------------------------------------------------------------


def test_replica_settings_are_checked_at_load():
    with pytest.raises(ValidationError, match="needs backend 'vllm'.*list the replicas' URLs in base_url"):
        PolicyConfig(backend="openai", base_url="http://h/v1", replicas=2)
    with pytest.raises(ValidationError, match="cpu_bind lists 1 core sets for 2 replicas"):
        PolicyConfig(replicas=2, cpu_bind=["0"])
    with pytest.raises(ValidationError, match="no room for 3 replicas"):
        PolicyConfig(replicas=3, port=65534)
    with pytest.raises(ValidationError, match="lists a replica twice"):
        PolicyConfig(backend="openai", base_url=[URLS[0], URLS[0]])
    with pytest.raises(ValidationError, match="max_concurrency"):
        PolicyConfig(max_concurrency=0)
    assert PolicyConfig(backend="openai", base_url=URLS).base_url == URLS


def test_devices_split_evenly_or_the_error_says_what_to_do():
    assert factory.split_devices(None, 2) == [None, None]
    assert factory.split_devices("0,1,2,3", 2) == ["0,1", "2,3"]
    assert factory.split_devices("5", 1) == ["5"]
    with pytest.raises(ValueError, match="cannot be split evenly among 2 replicas.*--data-parallel-size"):
        factory.split_devices("0,1,2", 2)


def test_the_factory_starts_each_replica_on_its_own_port_log_cores_and_devices(monkeypatch, tmp_path):
    from sesa_graph.policy import vllm_server

    started = []

    class Server(FakeServer):
        def __init__(self, spec):
            super().__init__(len(started))
            self.spec = spec
            started.append(self)

        def start(self, wait=True):
            return self

        def wait_healthy(self):
            pass

    monkeypatch.setattr(vllm_server, "VLLMServer", Server)
    monkeypatch.setattr(vllm_server, "ServedPolicy", lambda servers, tokenizer, **kw: (servers, kw))
    monkeypatch.setenv("SESA_TEST_TOKEN", "tok")
    cfg = PolicyConfig(
        replicas=2, port=8200, cpu_bind=["0", "1"], max_concurrency=12, api_key_env="SESA_TEST_TOKEN"
    )
    ((servers, kw),) = factory.make_policies([(cfg, None, tmp_path / "solver-vllm.log")], gpus=["0,1"])
    specs = [s.spec for s in servers]
    assert [s.port for s in specs] == [8200, 8201]
    assert [s.log_path.name for s in specs] == ["solver-vllm.log", "solver-vllm-2.log"]
    assert [s.cpu_bind for s in specs] == ["0", "1"]
    assert [s.cuda_visible_devices for s in specs] == ["0", "1"]
    assert {s.token for s in specs} == {"tok"} and kw["max_concurrency"] == 12


def test_nothing_starts_when_a_replica_cannot_be_planned(monkeypatch, tmp_path):
    from sesa_graph.policy import vllm_server

    monkeypatch.setattr(vllm_server, "VLLMServer", lambda spec: pytest.fail("a server started"))
    monkeypatch.delenv("SESA_TEST_TOKEN", raising=False)
    token = PolicyConfig(api_key_env="SESA_TEST_TOKEN")
    with pytest.raises(ValueError, match="SESA_TEST_TOKEN"):
        factory.make_policies([(PolicyConfig(), None, None), (token, None, None)])
    with pytest.raises(ValueError, match="split evenly"):
        factory.make_policies([(PolicyConfig(replicas=2), None, None)], gpus=["0"])


def test_an_openai_policy_with_replicas_probes_each_with_the_key(monkeypatch, no_tokenizer):
    probed = []
    monkeypatch.setattr(
        factory, "probe_endpoint", lambda url, limits, what, key=None: probed.append((url, key))
    )
    monkeypatch.setenv("SESA_TEST_KEY", "k")
    cfg = PolicyConfig(backend="openai", base_url=URLS[:2], api_key_env="SESA_TEST_KEY", max_concurrency=3)
    client = factory._client(cfg, tokenizer="m")
    assert probed == [(URLS[0], "k"), (URLS[1], "k")]
    assert client.base_urls == URLS[:2] and client.max_concurrency == 3
