"""A llama.cpp server (llama-cpp-python's OpenAI-compatible one) for a fixed model of the embedded default.

The judge, the distiller and the RAG reader of a laptop run call a never-trained model; run in-process through
transformers, a 1.5B took 334 s a consolidation and +3.1 GB in the orchestrator. Served from its Q4_K_M GGUF
by llama.cpp it loads in 2 s, answers a distiller prompt in about 4 s on 2 threads and holds under 2 GiB, in
a process of its own that the run starts, health-checks, logs to ``runs/NAME/logs/`` and stops on every exit
like a vLLM server (:class:`~sesa_graph.policy.vllm_server.VLLMServer`, whose lifecycle this reuses). Roles
reach it through :class:`~sesa_graph.policy.templated.ChatEndpoint` (``/v1/chat/completions``: the server
renders the GGUF's own chat template).

``scripts/llama_cpp_build.sh`` (run by the set-up) builds the pinned llama-cpp-python from source for the CPU.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from typing import Any

from sesa_graph.policy.templated import ChatEndpoint
from sesa_graph.policy.vllm_server import ServerStartError, VLLMServer
from sesa_graph.process import die_with_parent, yield_cpu
from tools.exits import oom_hint
from tools.ports import is_loopback

BUILD = "bash scripts/llama_cpp_build.sh"
# Restarts of a fixed model's server that died during a run: the judge and the distiller share it, and a
# judge that stays down stops the run (judge.max_consecutive_failures), so a crash the restart mends (a
# transient out-of-memory kill, say) costs a few seconds instead of the run.
MAX_RESTARTS = 2
log = logging.getLogger(__name__)


def llama_cpp_missing() -> str | None:
    """Why this environment cannot start a llama.cpp server (one line naming the fix), or None."""
    from importlib.util import find_spec

    if find_spec("llama_cpp") is None or find_spec("uvicorn") is None:
        return f"llama-cpp-python (with its server) is not installed here; `{BUILD}` builds it"
    return None


class LlamaServer(VLLMServer):
    """One ``python -m llama_cpp.server`` process serving ``spec.model_path`` (a GGUF) as ``spec.served_name``
    on 127.0.0.1, with ``spec.threads`` for generation and prompt processing alike."""

    ENGINE = "llama.cpp"
    restarts = 0  # by revive(), this server's own count once it has one
    _revive_lock = threading.Lock()  # one restart at a time (the judge's and the distiller's calls meet here)
    HEALTH = (
        "/v1/models"  # llama-cpp-python's server has no /health; the listing answers once the model loaded
    )

    def command(self) -> list[str]:
        s = self.spec
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            s.model_path,
            "--model_alias",
            s.served_name,
            "--host",
            s.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(s.max_model_len or 4096),
            "--n_threads",
            str(s.threads),
            "--n_threads_batch",
            str(s.threads),
            # read, not mapped: the CPU backend repacks most weights into buffers of its own, and the mapped
            # file's pages it read stay counted too (1.5B Q4_K_M after one call: 2.0 GiB PSS mapped, 1.4 read)
            "--use_mmap",
            "false",
            # llama-cpp-python keeps a batch x vocabulary float32 array of logits, and llama.cpp a compute buffer
            # of the batch's size: 128 instead of 512 tokens took the 1.5B from 2.37 to 1.92 GiB PSS after an
            # 880-token prompt, in the same 11.4 s (the prompt is read 128 tokens at a time either way on 2 cores)
            "--n_batch",
            "128",
            "--n_ubatch",
            "128",
            *s.extra_args,
        ]

    def _child_setup(self) -> None:
        die_with_parent()  # its threads are --n_threads; no binding
        yield_cpu(self.spec.nice)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.spec.owner:
            env["SESA_OWNER"] = self.spec.owner
        return env

    def start(self, wait: bool = True) -> LlamaServer:
        if not is_loopback(self.spec.host):
            raise ServerStartError(
                f"a llama.cpp server binds loopback only (got host {self.spec.host!r}): it has no token; serve "
                "a fixed model for other nodes with vLLM (backend 'vllm') instead"
            )
        why = llama_cpp_missing()
        if why:
            raise ServerStartError(why)
        return self._launch(wait)  # type: ignore[return-value]

    def oom_hint(self, rc: int | None, text: str) -> str:
        return oom_hint(rc, text, "the model's serve.max_model_len (its context) or a smaller GGUF")

    def revive(self) -> bool:
        """Start the server again on its port when it has died and restarts are left (True: it is up again,
        whether this call or a concurrent one restarted it); False when it runs on, or may not restart."""
        with self._revive_lock:
            why = self.dead()
            if why is None:
                return self.proc is not None
            if self.restarts >= MAX_RESTARTS:
                return False
            self.restarts += 1
            log.warning("%s; restarting it (%d of %d)", why.splitlines()[0], self.restarts, MAX_RESTARTS)
            self.proc = None
            try:
                self._launch(wait=True)
            except ServerStartError as exc:
                log.warning("the restart failed: %s", str(exc).splitlines()[0])
                return False
            return True


class ServedChat(ChatEndpoint):
    """A :class:`ChatEndpoint` on a llama.cpp server this process started: ``close()`` stops the server and
    ``dead()`` names it once it has exited."""

    def __init__(self, server: LlamaServer, **kwargs: Any) -> None:
        super().__init__(server.base_url, server.spec.served_name, **kwargs)
        self.server = server

    def dead(self) -> str | None:
        return self.server.dead()

    async def ainvoke(self, messages: Any, **kw: Any) -> Any:
        """ChatEndpoint's call; when it failed because the server died, the server is restarted
        (:meth:`LlamaServer.revive`) and the call made once more."""
        try:
            return await super().ainvoke(messages, **kw)
        except Exception:
            if self.server.dead() is None or not await asyncio.to_thread(self.server.revive):
                raise
        return await super().ainvoke(messages, **kw)

    def close(self) -> None:
        self.server.stop()
