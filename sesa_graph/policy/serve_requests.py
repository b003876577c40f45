"""The request bodies the project's policy servers accept, and the checks that turn a bad one into a 4xx.

One schema for both servers ``sesa policy serve`` starts: the in-process server (:mod:`sesa_graph.policy.serve`)
and the front put before vLLM (:mod:`sesa_graph.policy.vllm_validate`), whose own request models accept and
ignore unknown fields and take ``seed: -1`` or ``max_tokens: "8"``. Every field a request may carry is
declared here, strictly typed (``"8"`` and ``true`` are not numbers) and finite; an unknown field or a value
out of range is refused with a message naming the field, so that no option is silently ignored or coerced.
The in-process server also refuses the OpenAI/vLLM options it does not implement (:func:`refuse_unserved`).
The checks run before a request joins a batch, so a bad request never reaches the model.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from tools.request_body import BadRequest, json_object

RequestError = BadRequest  # the name this package's servers and tests use for a refused request
USE_VLLM = "not supported by sesa policy serve; use vLLM"
COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"

# Bounds on one request. vLLM takes more (any seed, logprobs=-1: the whole vocabulary per token, any n), and
# each is a way for one client to make the server build a giant answer; nothing the project sends comes near.
MAX_TOKENS = 2**31 - 1
MIN_TEMPERATURE = 1e-2  # vLLM raises smaller ones to this silently; the local policy overflows near 1e-38
MAX_N = 64
MAX_LOGPROBS = 20  # OpenAI's limit for top_logprobs
MAX_STOPS = 32
MAX_STOP_CHARS = 1000
MAX_PENALTY = 2.0  # OpenAI's range for presence/frequency penalties is [-2, 2]
MAX_LOGIT_BIAS = 100.0
MAX_MESSAGES = 1024  # the project's chats are a few turns; a template run over 100k turns holds a worker
ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


class _Sampling(BaseModel):
    # strict: `max_tokens: true` or `"8"` is a client bug to report, not a value to coerce
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    model: str | None = None
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = 1
    stream: bool = False
    stream_options: dict[str, bool] | None = None
    user: str | None = None  # an end-user id for abuse tracking; nothing to do with sampling
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    # vLLM's extras that the project's own client sends
    include_stop_str_in_output: bool = False
    return_token_ids: bool = False


class CompletionRequest(_Sampling):
    prompt: Any = None
    logprobs: int | None = None
    echo: bool = False
    best_of: int | None = None
    suffix: str | None = None


class ChatRequest(_Sampling):
    messages: Any = None
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool = True
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None


# pydantic names the branch of a union in an error's location (`stop.list[str].0`); the field is what counts
_UNION_TAG = re.compile(r"^(str|int|float|bool|list\[.*\]|dict\[.*\])$")

KINDS: dict[str, type[_Sampling]] = {COMPLETIONS: CompletionRequest, CHAT: ChatRequest}


def validate(data: dict[str, Any], kind: type[_Sampling]) -> Any:
    """``data`` (a parsed body) as ``kind``, its values in range: :class:`RequestError` naming the first bad
    field otherwise. What both servers check; the in-process one then also calls :func:`refuse_unserved`."""
    try:
        req = kind.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"] if not _UNION_TAG.match(str(p))) or "body"
        if err["type"] == "extra_forbidden":
            known = ", ".join(sorted(kind.model_fields))
            raise RequestError(f"unknown field {field!r}; this server takes: {known}", field) from None
        got = repr(err.get("input"))
        got = got if len(got) <= 80 else got[:77] + "..."
        raise RequestError(f"{field}: {err['msg']} (got {got})", field) from None
    _check_values(req)
    if isinstance(req, CompletionRequest):
        problem = prompt_problem(req.prompt)
        if problem:
            raise RequestError(problem, "prompt")
    else:
        _check_messages(req.messages)
    return req


def check_body(path: str, data: dict[str, Any]) -> None:
    """:func:`validate` for a POST to ``path`` (one of :data:`KINDS`); the hook of the body guard."""
    if path in KINDS:
        validate(data, KINDS[path])


def parse(raw: bytes, kind: type[_Sampling]) -> Any:
    """The in-process server's request: the body validated as ``kind``, and refused when it asks for what
    this server does not implement."""
    req = validate(json_object(raw), kind)
    refuse_unserved(req)
    return req


def _range(param: str, value: Any, ok: bool, rule: str) -> None:
    if not ok:
        raise RequestError(f"{param} must be {rule}, got {value!r}", param)


def _check_values(req: _Sampling) -> None:
    if req.max_tokens is not None:
        _range("max_tokens", req.max_tokens, 1 <= req.max_tokens, "at least 1")
        _range("max_tokens", req.max_tokens, req.max_tokens <= MAX_TOKENS, f"at most {MAX_TOKENS}")
    t = req.temperature
    _range("temperature", t, t >= 0, ">= 0 (0 = greedy)")
    _range("temperature", t, t == 0 or t >= MIN_TEMPERATURE, f"0 (greedy) or >= {MIN_TEMPERATURE}")
    _range("top_p", req.top_p, 0 < req.top_p <= 1, "in (0, 1]")
    if req.seed is not None:
        _range("seed", req.seed, 0 <= req.seed < 2**63, "in [0, 2**63)")
    stops = [req.stop] if isinstance(req.stop, str) else req.stop or []
    _range("stop", len(stops), len(stops) <= MAX_STOPS, f"at most {MAX_STOPS} strings")
    for s in stops:
        if not s:
            raise RequestError("stop: an empty stop string would end every completion at once", "stop")
        _range("stop", len(s), len(s) <= MAX_STOP_CHARS, f"strings of at most {MAX_STOP_CHARS} characters")
    _range("n", req.n, 1 <= req.n <= MAX_N, f"in [1, {MAX_N}]")
    for name in ("presence_penalty", "frequency_penalty"):
        v = getattr(req, name)
        if v is not None:
            _range(name, v, -MAX_PENALTY <= v <= MAX_PENALTY, f"in [-{MAX_PENALTY}, {MAX_PENALTY}]")
    for token, bias in (req.logit_bias or {}).items():
        where = f"logit_bias.{token}"
        _range(where, token, token.isdigit(), "keyed by a token id (a string of digits)")
        _range(where, bias, abs(bias) <= MAX_LOGIT_BIAS, f"in [-{MAX_LOGIT_BIAS}, {MAX_LOGIT_BIAS}]")
    if req.stream_options:
        extra = set(req.stream_options) - {"include_usage", "continuous_usage_stats"}
        _range("stream_options", req.stream_options, not extra, "include_usage/continuous_usage_stats only")
    if isinstance(req, CompletionRequest):
        if req.logprobs is not None:
            _range("logprobs", req.logprobs, 0 <= req.logprobs <= MAX_LOGPROBS, f"in [0, {MAX_LOGPROBS}]")
        if req.best_of is not None:
            _range("best_of", req.best_of, req.n <= req.best_of <= MAX_N, f"in [n, {MAX_N}]")
    if isinstance(req, ChatRequest):
        if req.max_completion_tokens is not None:
            _range(
                "max_completion_tokens",
                req.max_completion_tokens,
                1 <= req.max_completion_tokens,
                "at least 1",
            )
        if req.top_logprobs is not None:
            top = req.top_logprobs
            _range("top_logprobs", top, 0 <= top <= MAX_LOGPROBS, f"in [0, {MAX_LOGPROBS}]")


def prompt_problem(p: Any) -> str | None:
    """Why ``p`` is no completion prompt (None when it is one): a non-empty text, a non-empty list of
    non-negative token ids, or a batch of either."""
    if isinstance(p, str):
        return None if p else "prompt is empty"
    if not isinstance(p, list):
        return "prompt must be a string or a list of token ids"
    if not p:
        return "prompt is empty"
    if all(isinstance(x, (str, list)) for x in p):
        problems = [prompt_problem(x) for x in p]
        if any(isinstance(x, list) and any(isinstance(y, list) for y in x) for x in p):
            return "prompt: a batch holds texts or lists of token ids, not deeper lists"
        return next((f"prompt[{i}]: {m}" for i, m in enumerate(problems) if m), None)
    for i, t in enumerate(p):
        if not isinstance(t, int) or isinstance(t, bool) or t < 0:
            return f"prompt[{i}]: token id {t!r} is not a non-negative integer"
    return None


def _check_messages(msgs: Any) -> None:
    if not isinstance(msgs, list) or not msgs:
        raise RequestError("messages must be a non-empty list of {role, content}", "messages")
    if len(msgs) > MAX_MESSAGES:
        raise RequestError(f"messages: {len(msgs)} messages, at most {MAX_MESSAGES} per request", "messages")
    for i, m in enumerate(msgs):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            role = m.get("role") if isinstance(m, dict) else m
            raise RequestError(f"{where}.role must be one of {sorted(ROLES)}, got {role!r}", f"{where}.role")
        if not isinstance(m.get("content"), (str, list, type(None))):
            raise RequestError(
                f"{where}.content must be a string or a list of content parts", f"{where}.content"
            )


def _refuse(param: str, value: Any, allowed: str) -> None:
    raise RequestError(f"{param}={value!r} is {USE_VLLM} (this server takes {allowed})", param)


def refuse_unserved(req: _Sampling) -> None:
    """The in-process server's refusals: options vLLM implements and it does not."""
    if req.n != 1:
        _refuse("n", req.n, "n=1; send n requests instead")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(req, name):
            _refuse(name, getattr(req, name), "0")
    if req.logit_bias:
        _refuse("logit_bias", req.logit_bias, "none")
    if req.stream_options and set(req.stream_options) - {"include_usage"}:
        _refuse("stream_options", req.stream_options, "include_usage only")
    if isinstance(req, CompletionRequest):
        if req.echo:
            _refuse("echo", True, "echo=false")
        if req.best_of not in (None, 1):
            _refuse("best_of", req.best_of, "best_of=1")
        if req.suffix:
            _refuse("suffix", req.suffix, "none")
        if req.logprobs not in (None, 0):
            _refuse("logprobs", req.logprobs, "logprobs=0: the sampled tokens' log-probs, no alternatives")
    if isinstance(req, ChatRequest):
        if req.max_tokens is None and req.max_completion_tokens is not None:
            req.max_tokens = req.max_completion_tokens
        if req.top_logprobs not in (None, 0):
            _refuse("top_logprobs", req.top_logprobs, "top_logprobs=0")
        for name in ("tools", "functions", "response_format", "function_call", "parallel_tool_calls"):
            if getattr(req, name) is not None:
                raise RequestError(f"{name} is {USE_VLLM} (this server answers plain-text chat)", name)
        if req.tool_choice not in (None, "none"):
            _refuse("tool_choice", req.tool_choice, "none")


def check_model(req: _Sampling, served: str) -> None:
    """vLLM's rule: the model must be the served name (an omitted one means the served model)."""
    if req.model is not None and req.model != served:
        raise RequestError(
            f"The model {req.model!r} does not exist: this server serves {served!r} (GET /v1/models)",
            "model",
            status=404,
        )


def prompt_ids(req: CompletionRequest, encode: Any, check_ids: Any) -> list[int]:
    """The completion prompt as token ids: one text or one list of token ids, non-empty, in the vocabulary
    (:func:`validate` has checked its shape). A batch of one is that prompt: LangChain's ``OpenAI``
    completions class sends every prompt as ``["..."]``."""
    p = req.prompt
    if isinstance(p, list) and p and all(isinstance(x, (str, list)) for x in p):
        if len(p) > 1:
            raise RequestError(
                f"prompt: a batch of {len(p)} prompts is not supported (one prompt a request, or a list of "
                "one); send one request per prompt",
                "prompt",
            )
        p = p[0]
    ids = encode(p) if isinstance(p, str) else list(p)
    problem = None if isinstance(p, str) else check_ids(ids)
    if problem:
        raise RequestError(problem, "prompt")
    if not ids:
        raise RequestError("prompt is empty", "prompt")
    return ids


def chat_messages(req: ChatRequest) -> list[dict[str, str]]:
    """The chat messages as ``{role, content}`` with text content (text parts are joined); the in-process
    server's chat template takes no tool or developer turns."""
    out = []
    for i, m in enumerate(req.messages):
        where = f"messages[{i}]"
        if m["role"] not in ("system", "user", "assistant"):
            raise RequestError(
                f"{where}.role must be system, user or assistant, got {m['role']!r}", f"{where}.role"
            )
        extra = set(m) - {"role", "content", "name"}
        if extra:
            raise RequestError(f"{where}: {sorted(extra)} {USE_VLLM}", where)
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if (
                    not isinstance(part, dict)
                    or part.get("type") != "text"
                    or not isinstance(part.get("text"), str)
                ):
                    raise RequestError(f"{where}.content: only text parts are served; {USE_VLLM}", where)
                parts.append(part["text"])
            content = "".join(parts)
        if not isinstance(content, str):
            raise RequestError(
                f"{where}.content must be a string or a list of text parts", f"{where}.content"
            )
        out.append({"role": m["role"], "content": content})
    return out
