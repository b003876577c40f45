"""OpenAI-compatible policy client for a ``vllm serve`` endpoint (or ``sesa policy serve``).

Prompts go to ``/v1/completions`` as token ids with ``return_token_ids`` so that multi-turn rollouts are
rebuilt from exactly the tokens the server sampled; vLLM trims stop strings from the text but not from
the token ids, so the text is always re-decoded from the ids and cut with the same rule as the local
policy (:mod:`sesa_graph.policy.stops`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from sesa_graph.policy.base import GenerationRequest, GenerationResult, PolicyUnavailableError
from sesa_graph.policy.limits import CallLimits, call_with_retries
from sesa_graph.policy.stops import cut_at_stop

log = logging.getLogger(__name__)


class OpenAIPolicy:
    """A ``PolicyClient`` for any server that speaks vLLM's ``/v1/completions`` with token ids."""

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer: str | None = None,
        api_key: str = "EMPTY",
        timeout_s: float = 90.0,
        retries: int = 4,
        backoff_s: float = 0.5,
        max_concurrency: int = 64,
        max_context: int | None = None,
        *,
        connect_timeout_s: float = 5.0,
        deadline_s: float = 120.0,
        setting: str = "",
    ) -> None:
        from openai import AsyncOpenAI
        from transformers import AutoTokenizer

        from sesa_graph.embedded import resolve_policy_model

        self.name = model
        self.base_url = base_url.rstrip("/")
        self.tokenizer = AutoTokenizer.from_pretrained(resolve_policy_model(tokenizer or model))
        self.limits = CallLimits(
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            retries=retries,
            backoff_s=backoff_s,
            deadline_s=deadline_s,
            setting=setting,
        )
        # our own retry loop bounds the call and names the URL at the end; each request sets its timeout
        self._make_client = lambda: AsyncOpenAI(base_url=self.base_url, api_key=api_key, max_retries=0)
        # the server's prompt + completion limit: a turn asks for no more than fits, and a rollout already at
        # the limit gets an empty 'length' turn instead of an HTTP 400 that would stop the run
        self.max_context = max_context
        self.max_concurrency = max_concurrency
        # A semaphore and an HTTP connection pool belong to the event loop that first used them, and every
        # self-play step runs under a fresh `asyncio.run`: one of each per loop.
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[Any, asyncio.Semaphore]
        ] = weakref.WeakKeyDictionary()

    def _loop_state(self) -> tuple[Any, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(loop)
        if state is None:
            state = self._per_loop[loop] = (self._make_client(), asyncio.Semaphore(self.max_concurrency))
        return state

    def encode_messages(self, messages: list[dict[str, str]]) -> list[int]:
        out = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    def encode_text(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    async def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def _one(self, r: GenerationRequest) -> GenerationResult:
        prompt_ids = (
            list(r.prompt_ids) if r.prompt_ids is not None else self.encode_messages(r.messages or [])
        )
        s = r.sampling
        max_tokens = s.max_tokens
        if self.max_context is not None:
            max_tokens = min(max_tokens, self.max_context - len(prompt_ids))
            if max_tokens <= 0:
                return GenerationResult("", [], [], prompt_ids, "length")
        kwargs: dict[str, Any] = {
            "model": self.name,
            "prompt": prompt_ids,
            "max_tokens": max_tokens,
            "temperature": max(s.temperature, 0.0),
            "top_p": s.top_p,
            "logprobs": 0,
            "extra_body": {"return_token_ids": True, "include_stop_str_in_output": True},
        }
        if s.stop:
            kwargs["stop"] = list(s.stop)
        if s.seed is not None:
            kwargs["seed"] = s.seed
        client, sem = self._loop_state()
        async with sem:
            resp = await self._with_retries(client, kwargs)
        choice = resp.choices[0]
        ids = _field(choice, "token_ids")
        if ids is None:
            raise PolicyUnavailableError(
                f"{self.base_url} did not return token ids; start vLLM >= 0.10 (return_token_ids) "
                "or `sesa policy serve`"
            )
        lps = list(choice.logprobs.token_logprobs) if choice.logprobs else []
        ids = list(ids)
        keep, stop = cut_at_stop(self.tokenizer, ids, tuple(s.stop))
        ids = ids[:keep]
        if len(lps) < len(ids):
            raise PolicyUnavailableError(
                f"{self.base_url} returned {len(lps)} logprobs for {len(ids)} tokens; serve with "
                "--max-logprobs -1 and request logprobs=0"
            )
        finish = "stop" if stop else ("length" if choice.finish_reason == "length" else "eos")
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return GenerationResult(text, ids, [float(x) for x in lps[: len(ids)]], prompt_ids, finish, stop)

    async def _with_retries(self, client: Any, kwargs: dict[str, Any]) -> Any:
        return await call_with_retries(
            lambda timeout: client.completions.create(**kwargs, timeout=timeout),
            what=self.limits.what,
            url=self.base_url,
            limits=self.limits,
            gone=self._gone,
        )

    def _gone(self) -> str | None:
        """Why no retry can help (a server that exited), or None."""
        return None


def _field(obj: Any, name: str) -> Any:
    """vLLM's extra response fields live in pydantic's ``model_extra`` of the OpenAI SDK objects."""
    value = getattr(obj, name, None)
    if value is None and getattr(obj, "model_extra", None):
        value = obj.model_extra.get(name)
    return value
