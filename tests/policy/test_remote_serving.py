"""A policy server beyond loopback only on request and only behind a token: the config refuses the rest at
load, the server refuses to start open, and the ASGI guard loaded into vLLM lets nothing but /health through
without the token."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from sesa_graph.model_config import PolicyConfig

TOKEN = "s3cret-token"


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.2", "::", "node7.cluster"])
def test_a_non_loopback_host_needs_the_opt_in_and_a_token(host):
    with pytest.raises(ValidationError, match="allow_remote: true and api_key_env") as err:
        PolicyConfig(host=host)
    assert "127.0.0.1" in str(err.value)
    with pytest.raises(ValidationError, match="allow_remote with host .* needs api_key_env"):
        PolicyConfig(host=host, allow_remote=True)
    assert PolicyConfig(host=host, allow_remote=True, api_key_env="SESA_TEST_TOKEN").host == host


def test_loopback_and_other_backends_need_nothing():
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert PolicyConfig(host=host).allow_remote is False
    assert PolicyConfig(backend="local", host="0.0.0.0").backend == "local"  # 'local' binds nothing


def test_the_error_names_the_section_when_loaded_from_a_run_config():
    from sesa_graph.config import RunConfig

    with pytest.raises(ValidationError) as err:
        RunConfig.model_validate({"solver_policy": {"host": "0.0.0.0"}})
    assert "solver_policy" in str(err.value) and "allow_remote" in str(err.value)


def test_the_server_gets_the_token_from_the_named_variable(monkeypatch):
    from sesa_graph.policy.factory import server_spec
    from sesa_graph.policy.vllm_server import AUTH_MIDDLEWARE, VALIDATE_MIDDLEWARE, VLLMServer

    cfg = PolicyConfig(host="0.0.0.0", allow_remote=True, api_key_env="SESA_TEST_TOKEN", port=8100)
    monkeypatch.delenv("SESA_TEST_TOKEN", raising=False)
    with pytest.raises(ValueError, match="SESA_TEST_TOKEN .* is not set.*openssl rand"):
        server_spec(cfg, "embedded")
    monkeypatch.setenv("SESA_TEST_TOKEN", TOKEN)
    monkeypatch.setenv("SESA_VLLM_TOKEN", "inherited-from-elsewhere")
    spec = server_spec(cfg, "embedded")
    assert spec.token == TOKEN and TOKEN not in repr(spec)
    server = VLLMServer(spec)
    cmd = server.command()
    # vLLM adds each --middleware outside the ones before it: the token is checked first
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--middleware"] == [
        VALIDATE_MIDDLEWARE,
        AUTH_MIDDLEWARE,
    ]
    assert TOKEN not in " ".join(cmd)  # arguments are visible to every user of the machine
    env = server.env()
    assert env["SESA_VLLM_TOKEN"] == TOKEN and env["VLLM_SERVER_DEV_MODE"] == "1"
    assert server.headers() == {"Authorization": f"Bearer {TOKEN}"}
    assert server.root_url == "http://127.0.0.1:8100"  # this run's clients connect from this node


def test_without_a_token_nothing_changes_on_loopback_and_nothing_starts_elsewhere(monkeypatch):
    from sesa_graph.policy.vllm_server import AUTH_MIDDLEWARE, ServerSpec, ServerStartError, VLLMServer

    monkeypatch.setenv("SESA_VLLM_TOKEN", "inherited-from-elsewhere")
    plain = VLLMServer(ServerSpec("m", "m"))
    assert AUTH_MIDDLEWARE not in plain.command() and plain.headers() == {}
    assert "SESA_VLLM_TOKEN" not in plain.env() and plain.env()["VLLM_SERVER_DEV_MODE"] == "1"
    with pytest.raises(ServerStartError, match="0.0.0.0 .* token"):
        VLLMServer(ServerSpec("m", "m", host="0.0.0.0", port=8101)).start()


def test_an_address_not_on_this_machine_is_named_as_such_and_a_taken_port_as_taken():
    import socket

    from sesa_graph.policy.vllm_server import ServerSpec, ServerStartError, VLLMServer
    from tests.foreign_address import foreign_address
    from tools.ports import bind_problem

    foreign = foreign_address()
    said = bind_problem(foreign, 8102)
    assert f"{foreign} is not an address of this machine" in said and "in use" not in said
    with pytest.raises(ServerStartError, match="not an address of this machine"):  # no port: none to pick
        VLLMServer(ServerSpec("m", "m", host=foreign, token=TOKEN))
    with pytest.raises(ServerStartError, match="not an address of this machine"):
        VLLMServer(ServerSpec("m", "m", host=foreign, port=8102, token=TOKEN)).start()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        assert bind_problem("127.0.0.1", port).startswith(f"port {port} on 127.0.0.1 is in use")
    assert bind_problem("127.0.0.1", port) is None


# ---- the guard itself ----------------------------------------------------------------------------------------


async def _inner(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


def _status(app, path: str, headers: dict[str, str] | None = None, method: str = "POST") -> int:
    import httpx

    async def go() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://server") as client:
            return (await client.request(method, path, headers=headers or {})).status_code

    return asyncio.run(go())


def test_the_guard_lets_only_health_through_without_the_token(monkeypatch):
    from sesa_graph.policy.vllm_auth import BearerTokenMiddleware

    monkeypatch.setenv("SESA_VLLM_TOKEN", TOKEN)
    app = BearerTokenMiddleware(_inner)
    good = {"Authorization": f"Bearer {TOKEN}"}
    for path in (
        "/collective_rpc",
        "/pause",
        "/resume",
        "/reset_prefix_cache",
        "/v1/completions",
        "/tokenize",
    ):
        assert _status(app, path) == 401
        assert _status(app, path, {"Authorization": "Bearer wrong"}) == 401
        assert _status(app, path, {"Authorization": TOKEN}) == 401  # no scheme
        assert _status(app, path, good) == 200
    assert _status(app, "/health", method="GET") == 200
    assert _status(app, "/health/../pause") == 401


def test_the_guard_refuses_to_run_without_a_token(monkeypatch):
    from sesa_graph.policy.vllm_auth import BearerTokenMiddleware

    monkeypatch.delenv("SESA_VLLM_TOKEN", raising=False)
    with pytest.raises(RuntimeError, match="SESA_VLLM_TOKEN"):
        BearerTokenMiddleware(_inner)


def test_a_cpu_server_runs_the_model_in_its_engine_core_on_its_cores_and_a_gpu_one_keeps_vllm_s_layout():
    """On CPU one worker needs no process of its own (VLLMServer.one_worker_process); the KV cache goes in
    exact bytes, and the OpenMP threads are as many as the cores it is bound to. A GPU server, or a CPU one
    with tensor parallelism, keeps vLLM's layout."""
    from sesa_graph.policy.vllm_server import ServerSpec, VLLMServer

    cpu = VLLMServer(ServerSpec("m", "m", cpu_bind="0-1", kv_cache_gib=0.75))
    cmd, env = cpu.command(), cpu.env()
    assert cmd[cmd.index("--kv-cache-memory-bytes") + 1] == str(int(0.75 * 2**30))
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and env["OMP_NUM_THREADS"] == "2"
    assert "VLLM_CPU_KVCACHE_SPACE" not in env and "VLLM_CPU_OMP_THREADS_BIND" not in env
    assert VLLMServer(ServerSpec("m", "m", cpu_bind="0,2|4-5")).cores() == [0, 2, 4, 5]
    tp = VLLMServer(ServerSpec("m", "m", cpu_bind="0-1|2-3", extra_args=["--tensor-parallel-size", "2"]))
    assert not tp.one_worker_process and tp.env()["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3"
    gpu = VLLMServer(ServerSpec("m", "m", device="cuda"))
    assert not gpu.one_worker_process and "--kv-cache-memory-bytes" not in gpu.command()
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in gpu.env()


def test_stopping_a_server_whose_api_process_was_killed_stops_its_engine_too(tmp_path):
    """Killing a vLLM API server alone left its engine core holding its memory (3.4 GB): stop() now ends the
    server's whole process group even when its leader is gone. A stand-in server: a leader and a child."""
    import os
    import signal
    import sys
    import time

    from sesa_graph.policy.vllm_server import ServerSpec, VLLMServer

    pidfile = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(pidfile)!r}, 'w').write(str(c.pid)); time.sleep(600)"
    )

    class StandIn(VLLMServer):
        def command(self) -> list[str]:
            return [sys.executable, "-c", script]

    server = StandIn(ServerSpec("m", "m", log_path=tmp_path / "s.log")).start(wait=False)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(pidfile.read_text())
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    assert server.dead() is not None
    server.stop()
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the server's child {child} outlived stop()")


@pytest.mark.parametrize("bind", ["a-b", "1-0", "-1", "0-1|x"])
def test_a_cpu_bind_that_names_no_cores_is_a_config_error(bind):
    """The server binds its process tree to these cores before vLLM starts: a bad value is refused by its key,
    not met as a traceback in the server's start."""
    from sesa_graph.model_config import PolicyConfig

    with pytest.raises(ValueError, match=f"cpu_bind {bind!r}"):
        PolicyConfig(backend="vllm", cpu_bind=bind)
    with pytest.raises(ValueError, match="cpu_bind 'x'"):
        PolicyConfig(backend="vllm", cpu_bind=["0", "x"], replicas=2)
