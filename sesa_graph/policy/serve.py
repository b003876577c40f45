"""``sesa policy serve``: the local policy behind vLLM's ``/v1/completions`` fields, for CPU machines.

It answers the subset of the API our OpenAI client uses (token-id or text prompts, ``max_tokens``,
``temperature``, ``top_p``, ``stop``, ``seed``, ``logprobs``, ``return_token_ids``), so rollouts,
evaluation and tests can exercise the endpoint path where vLLM cannot run.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import BaseModel, Field

from sesa_graph.policy.base import GenerationRequest, SamplingParams
from sesa_graph.policy.local import LocalPolicy


class CompletionRequest(BaseModel):
    model: str = ""
    prompt: list[int] | str
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    stop: list[str] | str | None = None
    seed: int | None = None
    logprobs: int | None = None
    n: int = Field(1, ge=1, le=1, description="only n=1 is served")
    return_token_ids: bool = False
    include_stop_str_in_output: bool = False


def build_app(policy: LocalPolicy):
    from fastapi import FastAPI

    app = FastAPI(title="sesa local policy (vLLM /v1/completions subset)")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": policy.name, "object": "model"}]}

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest) -> dict[str, Any]:
        ids = req.prompt if isinstance(req.prompt, list) else policy.encode_text(req.prompt)
        stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
        sp = SamplingParams(req.max_tokens, req.temperature, req.top_p, stop, req.seed)
        (res,) = await policy.generate([GenerationRequest(prompt_ids=list(ids), sampling=sp)])
        text = res.text
        if res.stop_string and not req.include_stop_str_in_output and text.endswith(res.stop_string):
            text = text[: -len(res.stop_string)]
        choice: dict[str, Any] = {
            "index": 0,
            "text": text,
            "finish_reason": "length" if res.finish_reason == "length" else "stop",
            "stop_reason": res.stop_string,
            "logprobs": None,
        }
        if req.logprobs is not None:
            toks = [policy.tokenizer.decode([t]) for t in res.token_ids]
            choice["logprobs"] = {
                "tokens": toks,
                "token_logprobs": res.logprobs,
                "top_logprobs": None,
                "text_offset": None,
            }
        if req.return_token_ids:
            choice["token_ids"] = res.token_ids
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": policy.name,
            "choices": [choice],
            "prompt_token_ids": list(ids) if req.return_token_ids else None,
            "usage": {
                "prompt_tokens": len(ids),
                "completion_tokens": len(res.token_ids),
                "total_tokens": len(ids) + len(res.token_ids),
            },
        }

    return app
