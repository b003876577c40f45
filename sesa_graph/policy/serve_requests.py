"""The request bodies ``sesa policy serve`` accepts, and the checks that turn a bad one into a 4xx.

Every field a request may carry is declared here: an unknown field, a known OpenAI/vLLM option this server
does not implement, or a value out of range is refused with a message naming the field, so that no option is
silently ignored. The checks run before a request joins a batch, so a bad request never reaches the model.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

USE_VLLM = "not supported by sesa policy serve; use vLLM"


class RequestError(Exception):
    """A request the server refuses; rendered as OpenAI's error body with ``param`` naming the field."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status

    def body(self) -> dict[str, Any]:
        kind = {400: "BadRequestError", 404: "NotFoundError"}.get(self.status, "InternalServerError")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.status}}


class _Sampling(BaseModel):
    # strict: `max_tokens: true` or `"8"` is a client bug to report, not a value to coerce
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = None
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = 1
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    user: str | None = None  # an end-user id for abuse tracking; nothing to do with sampling
    # known OpenAI/vLLM options, declared so that a non-default value gets a clear refusal
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, Any] | None = None
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
    tools: Any = None
    tool_choice: Any = None
    functions: Any = None
    function_call: Any = None
    response_format: Any = None
    parallel_tool_calls: Any = None


def parse(raw: bytes, kind: type[_Sampling]) -> Any:
    """The request body as ``kind``; :class:`RequestError` naming the first bad field otherwise."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RequestError("the request body must be a JSON object")
    try:
        req = kind.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "body"
        if err["type"] == "extra_forbidden":
            raise RequestError(f"unknown field {field!r}: {USE_VLLM}", field) from None
        raise RequestError(f"{field}: {err['msg']} (got {err.get('input')!r})", field) from None
    _check_sampling(req)
    return req


def _refuse(param: str, value: Any, allowed: str) -> None:
    raise RequestError(f"{param}={value!r} is {USE_VLLM} (this server takes {allowed})", param)


def _check_sampling(req: _Sampling) -> None:
    if req.max_tokens is not None and req.max_tokens < 1:
        raise RequestError(f"max_tokens must be at least 1, got {req.max_tokens}", "max_tokens")
    if req.temperature < 0:
        raise RequestError(f"temperature must be >= 0 (0 = greedy), got {req.temperature}", "temperature")
    if not 0 < req.top_p <= 1:
        raise RequestError(f"top_p must be in (0, 1], got {req.top_p}", "top_p")
    if req.seed is not None and not 0 <= req.seed < 2**63:
        raise RequestError(f"seed must be in [0, 2**63), got {req.seed}", "seed")
    for s in [req.stop] if isinstance(req.stop, str) else req.stop or []:
        if not s:
            raise RequestError("stop: an empty stop string would end every completion at once", "stop")
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
            if req.max_completion_tokens < 1:
                raise RequestError("max_completion_tokens must be at least 1", "max_completion_tokens")
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
    """The completion prompt as token ids: one text or one list of token ids, non-empty, in the vocabulary."""
    p = req.prompt
    if isinstance(p, list) and p and all(isinstance(x, (str, list)) for x in p):
        raise RequestError(
            "prompt: a batch of prompts is not supported; send one request per prompt", "prompt"
        )
    if isinstance(p, str):
        ids = encode(p)
    elif isinstance(p, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
        ids = list(p)
        problem = check_ids(ids)
        if problem:
            raise RequestError(problem, "prompt")
    else:
        raise RequestError("prompt must be a string or a list of token ids", "prompt")
    if not ids:
        raise RequestError("prompt is empty", "prompt")
    return ids


def chat_messages(req: ChatRequest) -> list[dict[str, str]]:
    """The chat messages as ``{role, content}`` with text content (text parts are joined)."""
    msgs = req.messages
    if not isinstance(msgs, list) or not msgs:
        raise RequestError("messages must be a non-empty list of {role, content}", "messages")
    out = []
    for i, m in enumerate(msgs):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            role = m.get("role") if isinstance(m, dict) else m
            raise RequestError(
                f"{where}.role must be system, user or assistant, got {role!r}", f"{where}.role"
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
