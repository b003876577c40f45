"""Build policy clients and judges from their config sections (the one place that does).

An endpoint is probed before anything runs and a named API-key variable must be set, so a run that
cannot work fails at start-up with the reason, not at its first generation.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from sesa_graph.config import JudgeConfig, RunConfig
from sesa_graph.model_config import EndpointConfig, PolicyConfig
from sesa_graph.policy.base import PolicyUnavailableError
from sesa_graph.policy.limits import CallLimits
from sesa_graph.policy.templated import ChatEndpoint, for_role
from sesa_graph.rollout.judge import Judge

log = logging.getLogger(__name__)

POLICY_REF = "policy"  # a role's endpoint that names the solver policy being trained, not a fixed model
_SELF = {"judge": "grades itself", "distiller": "teaches itself", "rag_reader": "checks its own proposer"}


def probe_endpoint(base_url: str, limits: CallLimits, what: str, key: str | None = None) -> None:
    """GET ``{base_url}/models`` within ``limits`` (a listing answers in well under 10 s, so no attempt waits
    longer); an endpoint that never answers, or refuses ``key``, is an error at start, naming it."""
    import httpx

    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {key}"} if key and key != "EMPTY" else {}
    t0 = time.monotonic()
    end = t0 + limits.deadline_s
    err, attempts = "", 0
    while True:
        attempts += 1
        budget = min(limits.timeout_s, 10.0, end - time.monotonic())
        try:
            timeout = httpx.Timeout(budget, connect=min(limits.connect_timeout_s, budget))
            # the status is all the probe needs: a body (however large) is never read
            with httpx.stream("GET", url, timeout=timeout, headers=headers) as r:
                pass
            if r.status_code in (401, 403) and headers:
                raise PolicyUnavailableError(
                    f"{what} {base_url} refuses the API key (HTTP {r.status_code} from {url}): check the "
                    "environment variable api_key_env names"
                )
            if r.status_code < 500:
                return
            err = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            err = f"{type(exc).__name__}: {exc}"
        delay = min(limits.backoff_s * 2 ** (attempts - 1), 8.0)
        if attempts > limits.retries or delay + 1.0 > end - time.monotonic():
            break
        time.sleep(delay)
    raise PolicyUnavailableError(
        f"{what} {base_url} does not answer ({url}: {err}) after {attempts} attempts in "
        f"{time.monotonic() - t0:.1f}s; start it (e.g. `vllm serve MODEL` or `sesa policy serve`) or fix "
        "the URL"
    )


def api_key(env_var: str | None, what: str) -> str:
    if not env_var:
        return "EMPTY"
    key = os.environ.get(env_var, "")
    if not key:
        raise ValueError(f"environment variable {env_var} ({what} API key) is not set")
    return key


def server_token(cfg: PolicyConfig) -> str | None:
    """The token a ``backend: vllm`` server requires (from the variable ``api_key_env`` names), or None."""
    if not cfg.api_key_env:
        return None
    token = os.environ.get(cfg.api_key_env, "")
    if not token:
        raise ValueError(
            f"environment variable {cfg.api_key_env} (api_key_env: the token the {cfg.model} vLLM server "
            f"requires) is not set; set it where `sesa train` runs, e.g. `export {cfg.api_key_env}="
            "$(openssl rand -hex 32)`"
        )
    return token


def replica_log(log_path: Path | None, replica: int) -> Path | None:
    """Replica 0 logs where a single server would; replica i to ``<stem>-<i+1><suffix>``."""
    if log_path is None or replica == 0:
        return log_path
    return log_path.with_name(f"{log_path.stem}-{replica + 1}{log_path.suffix}")


def split_devices(devices: str | None, replicas: int) -> list[str | None]:
    """Each replica's CUDA_VISIBLE_DEVICES: an equal, contiguous share of ``devices``."""
    if devices is None or replicas == 1:
        return [devices] * replicas
    ids = [d.strip() for d in devices.split(",") if d.strip()]
    if len(ids) % replicas:
        raise ValueError(
            f"CUDA devices {devices!r} cannot be split evenly among {replicas} replicas; give the role a "
            "multiple of that many devices, or run one server with server_args ['--data-parallel-size', "
            f"'{replicas}'] instead of replicas"
        )
    k = len(ids) // replicas
    return [",".join(ids[i * k : (i + 1) * k]) for i in range(replicas)]


def server_spec(
    cfg: PolicyConfig,
    served_name: str,
    log_path: Path | None = None,
    owner: str | None = None,
    replica: int = 0,
) -> Any:
    """How to start replica ``replica`` of the vLLM servers of a ``backend: vllm`` policy."""
    from sesa_graph.embedded import resolve_policy_model
    from sesa_graph.policy.vllm_server import ServerSpec

    return ServerSpec(
        model_path=resolve_policy_model(cfg.model),
        served_name=served_name,
        host=cfg.host,
        port=cfg.port + replica if cfg.port is not None else None,
        dtype=cfg.dtype,
        max_model_len=cfg.max_model_len,
        kv_cache_gib=cfg.kv_cache_gib,
        device=cfg.device,
        cpu_bind=cfg.cpu_bind[replica] if isinstance(cfg.cpu_bind, list) else cfg.cpu_bind,
        enforce_eager=cfg.enforce_eager,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        startup_timeout_s=cfg.startup_timeout_s,
        extra_args=list(cfg.server_args),
        log_path=replica_log(log_path, replica),
        owner=owner,
        token=server_token(cfg),
        nice=cfg.nice,
    )


def make_policy(
    cfg: PolicyConfig, tokenizer: str | None = None, log_path: Path | None = None, setting: str = ""
) -> Any:
    """The policy client a :class:`PolicyConfig` describes. For ``backend: vllm`` this starts the server
    (blocking until it is healthy); the client's ``close()`` stops it, and so does the interpreter's exit.
    ``setting`` is the config section an error tells the user to edit (e.g. 'solver_policy')."""
    return name_settings(make_policies([(cfg, tokenizer, log_path)]), [setting])[0]


def name_settings(clients: list[Any], settings: Sequence[str | None]) -> list[Any]:
    """``clients`` whose timeout errors name their config sections (``settings``, one per client)."""
    for client, setting in zip(clients, settings, strict=False):
        limits = getattr(client, "limits", None)
        if setting and isinstance(limits, CallLimits):
            client.limits = replace(limits, setting=setting)
    return clients


def make_policies(
    specs: list[tuple[PolicyConfig, str | None, Path | None]],
    owner: str | None = None,
    gpus: list[str | None] | None = None,
) -> list[Any]:
    """Several policies at once: their vLLM servers (each policy's replicas) start side by side (each takes
    about 45 s on a CPU), except that servers sharing a GPU start one after another, each once the one before
    it is healthy; if one cannot start, those already started are stopped. ``owner`` marks the
    server processes; ``gpus`` gives each policy's CUDA_VISIBLE_DEVICES, split among its replicas."""
    from sesa_graph.policy.gpu_share import gpus_of, share_a_gpu
    from sesa_graph.policy.llama_server import LlamaServer, ServedChat
    from sesa_graph.policy.vllm_server import ServedPolicy, VLLMServer

    # every spec first: a missing token or an uneven device split fails before any server starts
    planned: dict[int, list[Any]] = {}
    for i, (cfg, _, log_path) in enumerate(specs):
        if cfg.backend == "llama.cpp":
            planned[i] = [llama_spec(cfg, log_path, owner)]
        elif cfg.backend == "vllm":
            devices = split_devices(gpus[i] if gpus else None, cfg.replicas)
            planned[i] = []
            for r in range(cfg.replicas):
                spec = server_spec(cfg, cfg.model, log_path, owner, replica=r)
                spec.cuda_visible_devices = devices[r]
                planned[i].append(spec)
    servers: dict[int, list[VLLMServer]] = {}
    started: list[tuple[frozenset[str] | None, Any]] = []
    try:
        for i, group in planned.items():
            servers[i] = []
            for spec in group:
                kind = VLLMServer if specs[i][0].backend == "vllm" else LlamaServer
                mine = gpus_of(specs[i][0].device, getattr(spec, "cuda_visible_devices", None))
                for (
                    theirs,
                    earlier,
                ) in started:  # one start-up at a time on a GPU (sesa_graph.policy.gpu_share)
                    if share_a_gpu(mine, theirs):
                        earlier.wait_healthy()
                server = kind(spec).start(wait=False)
                servers[i].append(server)
                started.append((mine, server))
        for group in servers.values():
            for server in group:
                server.wait_healthy()
        return [
            ServedChat(servers[i][0], limits=CallLimits.of(cfg))
            if cfg.backend == "llama.cpp"
            else ServedPolicy(
                servers[i],
                tokenizer=tok or cfg.model,
                chat_template_kwargs=cfg.chat_template_kwargs,
                **_limit_kwargs(cfg),
            )
            if i in servers
            else _client(cfg, tok)
            for i, (cfg, tok, _) in enumerate(specs)
        ]
    except BaseException:
        for group in servers.values():
            for server in group:
                server.stop()
        raise


def llama_spec(cfg: PolicyConfig, log_path: Path | None, owner: str | None) -> Any:
    """The llama.cpp server of a fixed model's ``serve:`` (its GGUF resolved, the name it serves under is its
    ``model``); ``threads`` (default 2) go to the server."""
    from sesa_graph.embedded import resolve_gguf
    from sesa_graph.policy.vllm_server import ServerSpec

    return ServerSpec(
        resolve_gguf(cfg.model),
        cfg.model,
        host=cfg.host,
        port=cfg.port,
        max_model_len=cfg.max_model_len,
        startup_timeout_s=cfg.startup_timeout_s,
        extra_args=list(cfg.server_args),
        log_path=log_path,
        owner=owner,
        threads=cfg.threads or 2,
        nice=cfg.nice,
    )


def _limit_kwargs(cfg: PolicyConfig | EndpointConfig) -> dict[str, Any]:
    keys = ("timeout_s", "connect_timeout_s", "retries", "backoff_s", "deadline_s")
    out = {k: getattr(cfg, k) for k in keys}
    if isinstance(cfg, PolicyConfig):
        out["max_concurrency"] = cfg.max_concurrency
    return out


def _client(cfg: PolicyConfig, tokenizer: str | None) -> Any:
    if cfg.backend == "openai":
        from sesa_graph.policy.openai_client import OpenAIPolicy

        urls = [cfg.base_url] if isinstance(cfg.base_url, str) else list(cfg.base_url or [])
        key = api_key(cfg.api_key_env, "policy")
        for url in urls:
            probe_endpoint(url, CallLimits.of(cfg), what="policy endpoint", key=key)
        # reload: vLLM servers (on other nodes, maybe) that the orchestrator reloads in place after each step
        from sesa_graph.policy.vllm_reload import RemoteVLLMPolicy

        kind = RemoteVLLMPolicy if cfg.reload else OpenAIPolicy
        client = kind(
            urls,
            cfg.model,
            tokenizer=tokenizer or cfg.train_model,
            api_key=key,
            chat_template_kwargs=cfg.chat_template_kwargs,
            **_limit_kwargs(cfg),
        )
        if isinstance(client, RemoteVLLMPolicy):
            client.check_servers()
        return client
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
        chat_template_kwargs=cfg.chat_template_kwargs,
    )


def warn_policy_ref(role: str) -> None:
    """A role served by the policy being trained is allowed, but never silently: unlike the paper, the
    policy then grades or teaches itself."""
    log.warning(
        "%s uses the solver policy being trained (endpoint 'policy'): the policy %s, unlike the paper's "
        "fixed model; name a model of `models:` to avoid it",
        role,
        _SELF.get(role, "serves this role itself"),
    )


def needed_models(cfg: RunConfig) -> list[str]:
    """The fixed models a run calls: the distiller's with memory 'on', the RAG reader's with rag_check, the
    judge's for kind 'model' -- a model no role uses is never started."""
    refs = []
    if cfg.memory.mode == "on":
        refs.append(cfg.distiller.endpoint)
    if cfg.proposer.rag_check:
        refs.append(cfg.proposer.rag_reader.endpoint)
    if cfg.judge.kind == "model":
        refs.append(cfg.judge.endpoint)
    return [r for r in dict.fromkeys(refs) if r != POLICY_REF]


def start_models(
    policy_specs: Sequence[tuple[PolicyConfig, str | None, Path | None]],
    models: dict[str, EndpointConfig],
    owner: str | None = None,
    policy_gpus: Sequence[str | None] | None = None,
    log_dir: Path | None = None,
    policy_settings: Sequence[str] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """The policies and the fixed ``models`` together: every vLLM server (a policy's or a served model's)
    starts side by side, then endpoints are probed; if anything fails, every server started is stopped.
    Served models are never reloaded; their clients' ``close()`` stops them like a policy's.
    ``policy_settings``: the policies' config sections, which their timeout errors name."""
    served = [(name, ep) for name, ep in models.items() if ep.serve is not None]
    for name, ep in served:
        if ep.serve is not None and ep.serve.backend == "openai":
            raise ValueError(
                f"models.{name}: serve with backend 'openai' starts nothing; give the endpoint as "
                f"models.{name}.base_url (+ model) instead"
            )
    specs = list(policy_specs) + [
        (ep.serve, None, log_dir / f"model-{name}-{_engine_tag(ep.serve)}.log" if log_dir else None)
        for name, ep in served
        if ep.serve is not None
    ]
    gpus = list(policy_gpus or [None] * len(policy_specs)) + [ep.cuda_visible_devices for _, ep in served]
    clients = make_policies(specs, owner=owner, gpus=gpus)
    named = list(policy_settings or [""] * len(policy_specs))
    name_settings(clients, named + [f"models.{name}.serve" for name, _ in served])
    policies = clients[: len(policy_specs)]
    fixed = dict(zip([name for name, _ in served], clients[len(policy_specs) :], strict=True))
    try:
        for name, ep in models.items():
            if ep.base_url is not None:
                fixed[name] = endpoint_client(name, ep)
    except BaseException:
        for client in clients:
            getattr(client, "close", lambda: None)()
        raise
    return policies, {name: fixed[name] for name in models}


def _engine_tag(cfg: PolicyConfig) -> str:
    return "llama-cpp" if cfg.backend == "llama.cpp" else "vllm"


def make_fixed_models(
    models: dict[str, EndpointConfig],
    names: Iterable[str],
    owner: str | None = None,
    log_dir: Path | None = None,
) -> dict[str, Any]:
    """Clients of the fixed models ``names`` (keys of ``models``): served ones started, endpoints probed."""
    names = list(dict.fromkeys(names))
    missing = [n for n in names if n not in models]
    if missing:
        raise KeyError(f"no model {missing[0]!r} in models (defined: {', '.join(sorted(models)) or 'none'})")
    return start_models([], {n: models[n] for n in names}, owner=owner, log_dir=log_dir)[1]


def endpoint_client(name: str, ep: EndpointConfig) -> Any:
    """The client of a ``base_url`` model, after probing it (a dead endpoint fails the start, not a step)."""
    base_url, model = ep.base_url or "", ep.model or ""
    limits = CallLimits.of(ep, setting=f"models.{name}")
    probe_endpoint(base_url, limits, what=f"model {name!r} endpoint")
    key = api_key(ep.api_key_env, f"model {name!r}")
    if ep.api == "chat":
        return ChatEndpoint(base_url, model, api_key=key, limits=limits)
    from sesa_graph.policy.openai_client import OpenAIPolicy

    return OpenAIPolicy(
        base_url,
        model,
        tokenizer=ep.tokenizer or model,
        api_key=key,
        **_limit_kwargs(ep),
        setting=limits.setting,
    )


def role_client(
    role: str,
    endpoint: str,
    chat_template_kwargs: dict[str, Any],
    fixed: dict[str, Any],
    policy: Any,
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> Any:
    """The client ``role`` calls: the fixed model ``endpoint`` names (or, warned, the policy), rendered with
    the role's chat-template arguments."""
    if endpoint == POLICY_REF:
        warn_policy_ref(role)
        client = policy
    elif endpoint in fixed:
        client = fixed[endpoint]
    else:
        raise KeyError(
            f"{role}: model {endpoint!r} was not started (started: {', '.join(sorted(fixed)) or 'none'})"
        )
    return for_role(client, chat_template_kwargs, max_tokens=max_tokens, temperature=temperature)


def make_judge(
    cfg: JudgeConfig, policy: Any, tokenizer: str | None = None, models: dict[str, Any] | None = None
) -> Judge:
    """``none``: exact match only; ``model``: the fixed model ``cfg.endpoint`` names in ``models`` (clients,
    as :func:`make_fixed_models` builds them); ``openai``: an endpoint; ``policy``: ``policy`` (warned).
    Every LLM judge renders its prompt with ``cfg.chat_template_kwargs``."""
    if cfg.kind == "none":
        return Judge(None)
    options = {"max_tokens": cfg.max_tokens, "temperature": 0.0}
    judge_kwargs: dict[str, Any] = {
        "timeout_s": cfg.timeout_s,
        "max_tokens": cfg.max_tokens,
        "max_consecutive_failures": cfg.max_consecutive_failures,
        "require_overlap": cfg.require_overlap,
    }
    if cfg.kind in ("policy", "model"):
        if cfg.kind == "model" and cfg.endpoint not in (models or {}):
            raise ValueError(
                f"judge kind 'model' names model {cfg.endpoint!r}, which was not started here "
                f"(started: {', '.join(sorted(models or {})) or 'none'}); define it in the run config's "
                "`models:` or give an endpoint (kind 'openai', base_url and model)"
            )
        endpoint = POLICY_REF if cfg.kind == "policy" else cfg.endpoint
        client = role_client("judge", endpoint, cfg.chat_template_kwargs, models or {}, policy, **options)
        return Judge(client, **judge_kwargs)
    from sesa_graph.policy.openai_client import OpenAIPolicy

    # one judge call, retries included, is bounded by judge.timeout_s (then judge_unavailable)
    limits = CallLimits(
        timeout_s=cfg.timeout_s,
        connect_timeout_s=cfg.connect_timeout_s,
        retries=cfg.retries,
        deadline_s=cfg.timeout_s,
        setting="judge",
        deadline_key="timeout_s",
    )
    probe_endpoint(cfg.base_url or "", limits, what="judge endpoint")
    client = OpenAIPolicy(
        cfg.base_url or "",
        cfg.model or "",
        tokenizer=tokenizer,
        api_key=api_key(cfg.api_key_env, "judge"),
    )
    client.limits = limits
    return Judge(for_role(client, cfg.chat_template_kwargs), **judge_kwargs)
