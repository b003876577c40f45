"""``sesa policy serve --engine local``: the in-process policy behind an OpenAI-compatible API, for CPU machines.

It serves ``/v1/completions`` with vLLM's fields (token-id or text prompts, ``max_tokens``, ``temperature``,
``top_p``, ``stop``, ``seed``, ``logprobs=0``, ``return_token_ids``, ``include_stop_str_in_output``) so that
rollouts, evaluation and tests exercise the endpoint path where vLLM cannot run, and ``/v1/chat/completions``
(the tokenizer's chat template, with ``chat_template_kwargs``) so that the official ``openai`` client works.
Requests are validated before they join a batch (:mod:`sesa_graph.policy.serve_requests`, through the body
guard of :mod:`tools.request_body`); what this server does not implement is refused with a 400 that says so.
``stream=True`` is answered as a stream whose text arrives in one chunk once the completion is done (the
local policy generates a whole batch at once).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from sesa_graph.policy.base import GenerationRequest, GenerationResult, SamplingParams
from sesa_graph.policy.local import LocalPolicy
from sesa_graph.policy.serve_requests import (
    KINDS,
    ChatRequest,
    CompletionRequest,
    RequestError,
    chat_messages,
    check_body,
    check_model,
    parse,
    prompt_ids,
)
from sesa_graph.policy.stops import first_stop
from tools.request_body import JsonBodyGuard

log = logging.getLogger(__name__)

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's and vLLM's default for /v1/completions


def build_app(policy: LocalPolicy, served_name: str | None = None) -> FastAPI:
    served = served_name or policy.name
    app = FastAPI(title=f"sesa policy serve ({served})")
    # the same bounded body reading and schema as the front sesa puts before vLLM
    app.add_middleware(JsonBodyGuard, paths=KINDS, check=check_body)

    @app.exception_handler(RequestError)
    async def refused(_: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    def card() -> dict[str, Any]:
        return {
            "id": served,
            "object": "model",
            "created": 0,
            "owned_by": "sesa",
            "root": str(policy.path),
            "max_model_len": policy.max_context,
        }

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [card()]}

    @app.get("/v1/models/{name:path}")
    async def model(name: str) -> dict[str, Any]:
        if name != served:
            raise RequestError(
                f"The model {name!r} does not exist: this server serves {served!r}", "model", 404
            )
        return card()

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        req: CompletionRequest = parse(await request.body(), CompletionRequest)
        check_model(req, served)
        ids = prompt_ids(req, policy.encode_text, policy.check_prompt_ids)
        res = await _generate(policy, ids, req, "prompt", COMPLETION_DEFAULT_MAX_TOKENS)
        choice = _completion_choice(policy, req, res, ids)
        body = _envelope("cmpl", "text_completion", served, res)
        if req.stream:
            return StreamingResponse(_sse(body, choice, req, chat=False), media_type="text/event-stream")
        return {**body, "choices": [choice]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        req: ChatRequest = parse(await request.body(), ChatRequest)
        check_model(req, served)
        ids = _render_chat(policy, req)
        res = await _generate(policy, ids, req, "messages", None)
        choice = _chat_choice(policy, req, res, ids)
        body = _envelope("chatcmpl", "chat.completion", served, res)
        if req.stream:
            return StreamingResponse(_sse(body, choice, req, chat=True), media_type="text/event-stream")
        return {**body, "choices": [choice]}

    return app


def _completion_choice(
    policy: LocalPolicy, req: CompletionRequest, res: Any, ids: list[int]
) -> dict[str, Any]:
    """The one choice of a /v1/completions reply, with logprobs and token ids when asked, as vLLM gives them."""
    choice: dict[str, Any] = {
        "index": 0,
        "text": _text(res, req.include_stop_str_in_output),
        "logprobs": None,
        "finish_reason": _finish(res),
        "stop_reason": res.stop_string,
    }
    if req.logprobs is not None:
        choice["logprobs"] = {
            "tokens": [policy.tokenizer.decode([t]) for t in res.token_ids],
            "token_logprobs": res.logprobs,
            "top_logprobs": None,
            "text_offset": None,
        }
    if req.return_token_ids:  # on the choice, where vLLM puts them
        choice["token_ids"] = res.token_ids
        choice["prompt_token_ids"] = ids
    return choice


def _chat_choice(policy: LocalPolicy, req: ChatRequest, res: Any, ids: list[int]) -> dict[str, Any]:
    """The one choice of a /v1/chat/completions reply, with logprobs and token ids when asked."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": _text(res, req.include_stop_str_in_output)},
        "logprobs": None,
        "finish_reason": _finish(res),
        "stop_reason": res.stop_string,
    }
    if req.logprobs:
        content = []
        for t, lp in zip(res.token_ids, res.logprobs):
            tok = policy.tokenizer.decode([t])
            content.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": []})
        choice["logprobs"] = {"content": content}
    if req.return_token_ids:
        choice["token_ids"] = res.token_ids
        choice["prompt_token_ids"] = ids
    return choice


def _render_chat(policy: LocalPolicy, req: ChatRequest) -> list[int]:
    msgs = chat_messages(req)
    kwargs = dict(req.chat_template_kwargs or {})
    try:
        out = policy.tokenizer.apply_chat_template(
            msgs, add_generation_prompt=req.add_generation_prompt, tokenize=True, **kwargs
        )
    except Exception as exc:  # noqa: BLE001 - a template error is the request's fault; name what it sent
        param = "chat_template_kwargs" if kwargs else "messages"
        raise RequestError(
            f"the chat template failed on {param}: {type(exc).__name__}: {exc}", param
        ) from None
    return list(out["input_ids"] if hasattr(out, "keys") else out)


async def _generate(
    policy: LocalPolicy, ids: list[int], req: Any, prompt_field: str, default_max: int | None
) -> GenerationResult:
    room = policy.max_context - len(ids)
    if room < 1:
        raise RequestError(
            f"{prompt_field}: the prompt has {len(ids)} tokens and the model's context is {policy.max_context}: "
            "nothing is left to generate; shorten it",
            prompt_field,
        )
    max_tokens = req.max_tokens or default_max or room
    if max_tokens > room:
        raise RequestError(
            f"max_tokens: the model's context is {policy.max_context} tokens; the prompt has {len(ids)}, so at "
            f"most {room} can be generated, not {max_tokens}",
            "max_tokens",
        )
    stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    sp = SamplingParams(max_tokens, req.temperature, req.top_p, stop, req.seed)
    try:
        (res,) = await policy.generate([GenerationRequest(prompt_ids=ids, sampling=sp)])
    except Exception as exc:  # this request's failure alone (the policy isolates it from its batch)
        log.exception("generation failed")
        raise RequestError(f"generation failed: {type(exc).__name__}: {exc}", None, 500) from None
    return res


def _text(res: GenerationResult, keep_stop: bool) -> str:
    """The completion text cut at its stop string (the last token may run past it), as vLLM returns it."""
    if not res.stop_string:
        return res.text
    hit = first_stop(res.text, (res.stop_string,))
    if hit is None:
        return res.text
    return res.text[: hit[0] if keep_stop else hit[0] - len(res.stop_string)]


def _finish(res: GenerationResult) -> str:
    return "length" if res.finish_reason == "length" else "stop"


def _envelope(prefix: str, obj: str, served: str, res: GenerationResult) -> dict[str, Any]:
    n_prompt, n_out = len(res.prompt_ids), len(res.token_ids)
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": obj,
        "created": int(time.time()),
        "model": served,
        "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out},
    }


def _sse(body: dict[str, Any], choice: dict[str, Any], req: Any, chat: bool):
    """The finished completion as server-sent events: one chunk with all the text, then the usage if asked."""
    head = {k: v for k, v in body.items() if k != "usage"}
    if chat:
        head["object"] = "chat.completion.chunk"
        choice = {**choice, "delta": choice.pop("message")}
    yield f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"
    if (req.stream_options or {}).get("include_usage"):
        yield f"data: {json.dumps({**head, 'choices': [], 'usage': body['usage']})}\n\n"
    yield "data: [DONE]\n\n"
