"""OpenAI-compatible policy client for a ``vllm serve`` endpoint (or ``sesa policy serve``).

Prompts go to ``/v1/completions`` as token ids with ``return_token_ids`` so that multi-turn rollouts are
rebuilt from exactly the tokens the server sampled; vLLM trims stop strings from the text but not from
the token ids, so the text is always re-decoded from the ids and cut with the same rule as the local
policy (:mod:`sesa_graph.policy.stops`).

Every reply is checked before it becomes a result (:mod:`sesa_graph.policy.replies`): token ids in the
vocabulary and no more than asked for, one finite log probability per token, the JSON shape; a bad reply is a
:class:`~sesa_graph.policy.base.BadReplyError` naming the URL and the field.

Several replicas of one model (``base_url`` as a list) are one client: each request goes to the replica with
the fewest requests in flight (queued here or at the server), each replica takes at most ``max_concurrency``
at a time, and a request's retries stay on its replica, so a failure names the replica that failed.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sesa_graph.policy.base import GenerationRequest, GenerationResult, PolicyUnavailableError
from sesa_graph.policy.limits import CallLimits, call_with_retries
from sesa_graph.policy.replies import Completion, completion, post_json, reply_cap, vocab_limit
from sesa_graph.policy.stops import cut_at_stop
from sesa_graph.policy.templated import render_chat

log = logging.getLogger(__name__)


@dataclass
class _LoopState:
    """One event loop's clients, per-replica semaphores and in-flight counts (an HTTP connection pool and a
    semaphore belong to the loop that first used them, and every self-play step runs under a fresh
    ``asyncio.run``)."""

    clients: list[Any]
    gates: list[asyncio.Semaphore]
    in_flight: list[int] = field(default_factory=list)
    turn: int = 0  # rotates ties, so an idle pool of replicas is filled evenly

    def pick(self) -> int:
        n = len(self.clients)
        i = min(range(n), key=lambda j: (self.in_flight[j], (j - self.turn) % n))
        self.turn = (i + 1) % n
        return i


class OpenAIPolicy:
    """A ``PolicyClient`` for any server (or replicas of one) that speaks vLLM's ``/v1/completions`` with
    token ids."""

    def __init__(
        self,
        base_url: str | Sequence[str],
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
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """``base_url``: one endpoint or a list of replicas serving the same ``model``; ``max_concurrency``:
        requests in flight per replica (more wait here); ``chat_template_kwargs``: the extra arguments every
        chat prompt is rendered with (``PolicyConfig.chat_template_kwargs``)."""
        import httpx
        from transformers import AutoTokenizer

        from sesa_graph.embedded import resolve_policy_model

        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError(f"policy {model!r}: no base_url given")
        self.name = model
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.base_urls = [u.rstrip("/") for u in urls]
        self.base_url = self.base_urls[0]
        source = resolve_policy_model(tokenizer or model)
        self.tokenizer = AutoTokenizer.from_pretrained(source)
        self.vocab_size = vocab_limit(self.tokenizer, source)  # a token id past it is a bad reply
        self.limits = CallLimits(
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            retries=retries,
            backoff_s=backoff_s,
            deadline_s=deadline_s,
            setting=setting,
        )
        # our own retry loop bounds the call and names the URL at the end; each request sets its timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key and api_key != "EMPTY" else {}
        self._make_client = lambda url: httpx.AsyncClient(
            headers=headers, limits=httpx.Limits(max_connections=max_concurrency + 4)
        )
        # the server's prompt + completion limit: a turn asks for no more than fits, and a rollout already at
        # the limit gets an empty 'length' turn instead of an HTTP 400 that would stop the run
        self.max_context = max_context
        self.max_concurrency = max_concurrency
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(loop)
        if state is None:
            n = len(self.base_urls)
            state = self._per_loop[loop] = _LoopState(
                clients=[self._make_client(url) for url in self.base_urls],
                gates=[asyncio.Semaphore(self.max_concurrency) for _ in range(n)],
                in_flight=[0] * n,
            )
        return state

    def encode_messages(self, messages: list[dict[str, str]]) -> list[int]:
        return render_chat(self.tokenizer, messages, **self.chat_template_kwargs)

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
        payload: dict[str, Any] = {
            "model": self.name,
            "prompt": prompt_ids,
            "max_tokens": max_tokens,
            "temperature": max(s.temperature, 0.0),
            "top_p": s.top_p,
            "logprobs": 0,
            "return_token_ids": True,
            "include_stop_str_in_output": True,
        }
        if s.stop:
            payload["stop"] = list(s.stop)
        if s.seed is not None:
            payload["seed"] = s.seed
        state = self._loop_state()
        i = state.pick()
        url = self.base_urls[i]
        state.in_flight[i] += 1
        try:
            async with state.gates[i]:
                reply = await self._with_retries(state.clients[i], payload, i)
        finally:
            state.in_flight[i] -= 1
        if reply.token_ids is None:
            raise PolicyUnavailableError(
                f"{url} did not return token ids; start vLLM >= 0.10 (return_token_ids) "
                "or `sesa policy serve`"
            )
        ids, lps = reply.token_ids, reply.logprobs
        if len(lps) != len(ids):
            raise PolicyUnavailableError(
                f"{url} returned {len(lps)} logprobs for {len(ids)} tokens; serve with "
                "--max-logprobs -1 and request logprobs=0"
            )
        keep, stop = cut_at_stop(self.tokenizer, ids, tuple(s.stop))
        ids = ids[:keep]
        finish = "stop" if stop else ("length" if reply.finish_reason == "length" else "eos")
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return GenerationResult(text, ids, lps[: len(ids)], prompt_ids, finish, stop)

    async def _with_retries(self, client: Any, payload: dict[str, Any], replica: int = 0) -> Completion:
        """One completion from replica ``replica``, its reply checked; retried within ``self.limits``."""
        url = self.base_urls[replica]
        max_tokens = payload["max_tokens"]

        async def attempt(timeout: Any) -> Completion:
            body = await post_json(client, f"{url}/completions", payload, timeout, reply_cap(max_tokens))
            return completion(body, vocab=self.vocab_size, max_tokens=max_tokens)

        return await call_with_retries(
            attempt, what=self.limits.what, url=url, limits=self.limits, gone=lambda: self._gone(replica)
        )

    def _gone(self, replica: int = 0) -> str | None:
        """Why no retry can help (replica ``replica``'s server exited), or None."""
        return None
