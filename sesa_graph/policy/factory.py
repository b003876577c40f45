"""Build policy clients and judges from their config sections (the one place that does).

An endpoint is probed before anything runs and a named API-key variable must be set, so a run that
cannot work fails at start-up with the reason, not at its first generation.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sesa_graph.config import JudgeConfig, PolicyConfig
from sesa_graph.nodes.judge import Judge
from sesa_graph.policy.base import PolicyUnavailableError


def probe_endpoint(base_url: str, retries: int, what: str) -> None:
    """GET ``{base_url}/models`` with retries; an endpoint that never answers is an error at start."""
    import httpx

    url = base_url.rstrip("/") + "/models"
    err = ""
    for attempt in range(retries + 1):
        try:
            r = httpx.get(url, timeout=10.0)
            if r.status_code < 500:
                return
            err = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            err = f"{type(exc).__name__}: {exc}"
        if attempt < retries:
            time.sleep(min(0.5 * 2**attempt, 8.0))
    raise PolicyUnavailableError(
        f"{what} {base_url} does not answer ({url}: {err}) after {retries + 1} attempts; "
        "start it (e.g. `vllm serve MODEL` or `sesa policy serve`) or fix the URL"
    )


def api_key(env_var: str | None, what: str) -> str:
    if not env_var:
        return "EMPTY"
    key = os.environ.get(env_var, "")
    if not key:
        raise ValueError(f"environment variable {env_var} ({what} API key) is not set")
    return key


def server_spec(
    cfg: PolicyConfig, served_name: str, log_path: Path | None = None, owner: str | None = None
) -> Any:
    """How to start the vLLM server of a ``backend: vllm`` policy."""
    from sesa_graph.embedded import resolve_policy_model
    from sesa_graph.policy.vllm_server import ServerSpec

    return ServerSpec(
        model_path=resolve_policy_model(cfg.model),
        served_name=served_name,
        host=cfg.host,
        port=cfg.port,
        dtype=cfg.dtype,
        max_model_len=cfg.max_model_len,
        kv_cache_gib=cfg.kv_cache_gib,
        cpu_bind=cfg.cpu_bind,
        enforce_eager=cfg.enforce_eager,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        startup_timeout_s=cfg.startup_timeout_s,
        extra_args=list(cfg.server_args),
        log_path=log_path,
        owner=owner,
    )


def make_policy(cfg: PolicyConfig, tokenizer: str | None = None, log_path: Path | None = None) -> Any:
    """The policy client a :class:`PolicyConfig` describes. For ``backend: vllm`` this starts the server
    (blocking until it is healthy); the client's ``close()`` stops it, and so does the interpreter's exit."""
    return make_policies([(cfg, tokenizer, log_path)])[0]


def make_policies(
    specs: list[tuple[PolicyConfig, str | None, Path | None]],
    owner: str | None = None,
    gpus: list[str | None] | None = None,
) -> list[Any]:
    """Several policies at once: their vLLM servers start side by side (each takes about 45 s on a CPU),
    and if one cannot start, those already started are stopped. ``owner`` marks the server processes;
    ``gpus`` gives each one's CUDA_VISIBLE_DEVICES."""
    from sesa_graph.policy.vllm_server import ServedPolicy, VLLMServer

    servers: dict[int, VLLMServer] = {}
    try:
        for i, (cfg, _, log_path) in enumerate(specs):
            if cfg.backend == "vllm":
                spec = server_spec(cfg, cfg.model, log_path, owner)
                spec.cuda_visible_devices = gpus[i] if gpus else None
                servers[i] = VLLMServer(spec).start(wait=False)
        for server in servers.values():
            server.wait_healthy()
        return [
            ServedPolicy(servers[i], tokenizer=tok or cfg.model, timeout_s=cfg.timeout_s, retries=cfg.retries)
            if i in servers
            else _client(cfg, tok)
            for i, (cfg, tok, _) in enumerate(specs)
        ]
    except BaseException:
        for server in servers.values():
            server.stop()
        raise


def _client(cfg: PolicyConfig, tokenizer: str | None) -> Any:
    if cfg.backend == "openai":
        from sesa_graph.policy.openai_client import OpenAIPolicy

        probe_endpoint(cfg.base_url or "", cfg.retries, what="policy endpoint")
        return OpenAIPolicy(
            cfg.base_url or "",
            cfg.model,
            tokenizer=tokenizer or cfg.train_model,
            api_key=api_key(cfg.api_key_env, "policy"),
            timeout_s=cfg.timeout_s,
            retries=cfg.retries,
        )
    from sesa_graph.policy.local import LocalPolicy

    return LocalPolicy(
        cfg.model,
        device=cfg.device,
        dtype=cfg.dtype,
        max_batch_size=cfg.max_batch_size,
        batch_wait_ms=cfg.batch_wait_ms,
        batch_max_wait_ms=cfg.batch_max_wait_ms,
        threads=cfg.threads,
        kv_cache_mb=cfg.kv_cache_mb,
    )


def make_judge(cfg: JudgeConfig, policy: Any, tokenizer: str | None = None) -> Judge:
    """``none``: exact match only; ``policy``: ``policy`` judges; ``openai``: an endpoint."""
    if cfg.kind == "none":
        return Judge(None)
    if cfg.kind == "policy":
        return Judge(policy, timeout_s=cfg.timeout_s)
    from sesa_graph.policy.openai_client import OpenAIPolicy

    probe_endpoint(cfg.base_url or "", 2, what="judge endpoint")
    return Judge(
        OpenAIPolicy(
            cfg.base_url or "",
            cfg.model or "",
            tokenizer=tokenizer,
            api_key=api_key(cfg.api_key_env, "judge"),
            timeout_s=cfg.timeout_s,
            retries=2,
        ),
        timeout_s=cfg.timeout_s,
    )
