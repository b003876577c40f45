"""Clients for the fixed models a role calls (judge, distiller, RAG-check reader), rendered the role's way.

:class:`TemplatedPolicy` wraps any ``PolicyClient`` and renders chat messages with extra chat-template
arguments (``chat_template_kwargs``, e.g. ``{enable_thinking: false}`` for Qwen3), so two roles can share
one model and one server while each gets its own template. :class:`ChatEndpoint` calls an
OpenAI-compatible ``/v1/chat/completions`` (a hosted API that takes no token ids) with an ``ainvoke``
like a langchain chat model's, so the judge and the distiller drive it as they drive any chat model.
"""

from __future__ import annotations

import asyncio
import copy as _copy
import logging
import weakref
from dataclasses import replace
from typing import Any

from sesa_graph.policy.base import GenerationRequest, GenerationResult
from sesa_graph.policy.limits import CallLimits, call_with_retries
from sesa_graph.policy.replies import chat_reply, post_json, reply_cap

log = logging.getLogger(__name__)


def render_chat(tokenizer: Any, messages: list[dict[str, str]], **chat_template_kwargs: Any) -> list[int]:
    """Prompt token ids of ``messages`` up to the assistant header, the template given ``chat_template_kwargs``."""
    out = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, **chat_template_kwargs
    )
    return list(out["input_ids"] if hasattr(out, "keys") else out)


class TemplatedPolicy:
    """A ``PolicyClient`` that renders ``messages`` requests itself, with ``chat_template_kwargs``; token-id
    requests and everything else go to ``client`` unchanged (``close``, ``dead`` ... by attribute)."""

    def __init__(self, client: Any, chat_template_kwargs: dict[str, Any]) -> None:
        self.client = client
        self.chat_template_kwargs = dict(chat_template_kwargs)
        self.name = client.name
        self.tokenizer = client.tokenizer

    def encode_messages(self, messages: list[dict[str, str]]) -> list[int]:
        return render_chat(self.tokenizer, messages, **self.chat_template_kwargs)

    def encode_text(self, text: str) -> list[int]:
        return self.client.encode_text(text)

    async def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        rendered = [
            r
            if r.messages is None
            else replace(r, messages=None, prompt_ids=self.encode_messages(r.messages))
            for r in requests
        ]
        return await self.client.generate(rendered)

    def __getattr__(self, name: str) -> Any:
        if name == "client":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.client, name)

    def __repr__(self) -> str:
        return f"TemplatedPolicy({self.name!r}, {self.chat_template_kwargs})"


class ChatReply:
    """What :meth:`ChatEndpoint.ainvoke` returns: ``text``/``content`` as a langchain ``AIMessage`` has."""

    def __init__(self, text: str, finish_reason: str | None = None) -> None:
        self.text = self.content = text
        self.finish_reason = finish_reason

    def __repr__(self) -> str:
        return f"ChatReply({self.text!r}, finish_reason={self.finish_reason!r})"


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "user": "user", "assistant": "assistant"}


def _as_dicts(messages: Any) -> list[dict[str, str]]:
    """Chat messages as dicts, from dicts, langchain messages or one string."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    out = []
    for m in messages:
        if isinstance(m, dict):
            out.append({"role": m["role"], "content": m["content"]})
        else:
            out.append({"role": _ROLES.get(m.type, m.type), "content": m.content})
    return out


class ChatEndpoint:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint with an ``ainvoke(messages)`` call.

    ``chat_template_kwargs`` go to the server as ``extra_body`` (vLLM and SGLang render the template with
    them); ``max_tokens`` and ``temperature`` are the calling role's (see :meth:`with_options`).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "EMPTY",
        limits: CallLimits | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> None:
        self.name = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.limits = limits or CallLimits(retries=2)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.max_tokens = max_tokens
        self.temperature = temperature
        # an AsyncOpenAI's connection pool belongs to the event loop that first used it (each self-play step
        # and the consolidation thread run their own loops)
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def with_options(self, **options: Any) -> ChatEndpoint:
        """A copy with other ``chat_template_kwargs``/``max_tokens``/``temperature`` (one per role); a
        subclass's copy keeps what the subclass holds (a served endpoint its server)."""
        copy = _copy.copy(self)
        for key, value in options.items():
            if key not in ("chat_template_kwargs", "max_tokens", "temperature"):
                raise TypeError(f"with_options: unknown option {key!r}")
            setattr(copy, key, dict(value or {}) if key == "chat_template_kwargs" else value)
        copy._clients = weakref.WeakKeyDictionary()  # a connection pool is never shared between copies
        return copy

    def _client(self) -> Any:
        import httpx

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            key = self.api_key
            headers = {"Authorization": f"Bearer {key}"} if key and key != "EMPTY" else {}
            client = self._clients[loop] = httpx.AsyncClient(headers=headers)
        return client

    async def ainvoke(self, messages: Any, **_: Any) -> ChatReply:
        """The reply to ``messages``, checked (:func:`sesa_graph.policy.replies.chat_reply`); a bad one is a
        :class:`~sesa_graph.policy.base.BadReplyError` naming the URL and the field."""
        payload: dict[str, Any] = {
            "model": self.name,
            "messages": _as_dicts(messages),
            "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        if self.chat_template_kwargs:
            payload["chat_template_kwargs"] = self.chat_template_kwargs
        client = self._client()
        # no max_tokens: a hosted model's own limit bounds the reply; the cap allows a long answer
        cap = reply_cap(self.max_tokens if self.max_tokens is not None else 16384)
        url = f"{self.base_url}/chat/completions"

        async def attempt(timeout: Any) -> tuple[str, str | None]:
            return chat_reply(await post_json(client, url, payload, timeout, cap))

        # a reasoning parser moves the thinking to reasoning_content: an answer cut off inside it is empty
        content, finish = await call_with_retries(
            attempt, what=f"chat endpoint ({self.name})", url=self.base_url, limits=self.limits
        )
        return ChatReply(content, finish)

    def __repr__(self) -> str:
        return f"ChatEndpoint({self.base_url!r}, {self.name!r})"


def for_role(
    client: Any,
    chat_template_kwargs: dict[str, Any],
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> Any:
    """``client`` as one role calls it: its chat-template arguments, and for a :class:`ChatEndpoint` (whose
    sampling is not set per request) the role's ``max_tokens`` and ``temperature``."""
    if isinstance(client, ChatEndpoint):
        options: dict[str, Any] = {"chat_template_kwargs": chat_template_kwargs}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        if temperature is not None:
            options["temperature"] = temperature
        return client.with_options(**options)
    return TemplatedPolicy(client, chat_template_kwargs) if chat_template_kwargs else client
