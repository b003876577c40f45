"""What an OpenAI-compatible endpoint sends back, checked before it becomes a trajectory or a verdict.

A completion must carry exactly one choice whose token ids are integers in the policy's vocabulary, no more
of them than were asked for (``max_tokens``), one finite log probability (at most 0) per token, a text string
and a known ``finish_reason``; a chat reply one choice whose message content is a string. Anything else is a
:class:`~tools.replies.ReplyError` naming the field, which :func:`sesa_graph.policy.limits.call_with_retries`
turns into a :class:`~sesa_graph.policy.base.BadReplyError` naming the URL. Bodies are read up to a cap
that grows with the tokens asked for.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tools.replies import ReplyError, aread_capped, check_status, field, finite, parse_json

log = logging.getLogger(__name__)

BASE_BYTES = 256 * 1024
"""Body cap of any reply: headers of the JSON, usage, an error page."""
BYTES_PER_TOKEN = 4096
"""Body cap per token asked for: its id, text, log probability and offsets take well under 200 bytes."""
FINISH_REASONS = ("stop", "length")
# vLLM's logprobs are log-softmax outputs: never above 0, but float rounding may put one a hair over
LOGPROB_SLACK = 1e-3


def reply_cap(max_tokens: int) -> int:
    """The most bytes a reply to a request for ``max_tokens`` tokens may hold."""
    return BASE_BYTES + BYTES_PER_TOKEN * max(int(max_tokens), 0)


async def post_json(client: Any, url: str, payload: dict[str, Any], timeout: Any, max_bytes: int) -> Any:
    """POST ``payload`` to ``url`` with the httpx ``client`` and return the reply's JSON, read at most
    ``max_bytes``; an error status raises (see :func:`tools.replies.check_status`)."""
    async with client.stream("POST", url, json=payload, timeout=timeout) as resp:
        body = await aread_capped(resp.aiter_bytes(), max_bytes)
    check_status(resp.status_code, body)
    return parse_json(body)


@dataclass
class Completion:
    """One checked ``/v1/completions`` choice."""

    token_ids: list[int] | None  # None: the server does not return token ids (an old vLLM)
    logprobs: list[float]
    finish_reason: str


def one_choice(body: Any) -> dict[str, Any]:
    choices = field(body, "choices", list, "reply")
    if len(choices) != 1:
        raise ReplyError(f"the reply has {len(choices)} choices, not the 1 asked for")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ReplyError("choices[0] is not an object")
    return choice


def completion(body: Any, *, vocab: int | None, max_tokens: int) -> Completion:
    """The one choice of a completions reply, checked (see the module docstring)."""
    choice = one_choice(body)
    field(choice, "text", str, "choices[0]")
    finish = field(choice, "finish_reason", str, "choices[0]")
    if finish not in FINISH_REASONS:
        raise ReplyError(
            f"choices[0].finish_reason is {finish[:40]!r}, not one of {', '.join(FINISH_REASONS)}"
        )
    ids = field(choice, "token_ids", list, "choices[0]", optional=True)
    if ids is not None:
        ids = _token_ids(ids, vocab, max_tokens)
    lps_obj = field(choice, "logprobs", dict, "choices[0]", optional=True)
    raw = field(lps_obj, "token_logprobs", list, "choices[0].logprobs") if lps_obj is not None else []
    if ids is not None and lps_obj is not None and len(raw) != len(ids):
        raise ReplyError(
            f"choices[0].logprobs.token_logprobs has {len(raw)} entries for {len(ids)} token ids; the "
            "server must return one log probability per token"
        )
    lps = [_logprob(x, i) for i, x in enumerate(raw)]
    return Completion(ids, lps, finish)


def _token_ids(ids: list[Any], vocab: int | None, max_tokens: int) -> list[int]:
    if len(ids) > max_tokens:
        raise ReplyError(f"choices[0].token_ids has {len(ids)} tokens, more than the {max_tokens} asked for")
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int):
            raise ReplyError(
                f"choices[0].token_ids[{i}] is {type(t).__name__} {str(t)[:40]!r}, not a token id"
            )
        if t < 0 or (vocab is not None and t >= vocab):
            bound = f"0..{vocab - 1}" if vocab is not None else "0 or more"
            raise ReplyError(
                f"choices[0].token_ids[{i}] is {t}, outside the vocabulary ({bound}); is the server "
                "serving another model than the tokenizer's?"
            )
    return ids


def _logprob(value: Any, i: int) -> float:
    where = f"choices[0].logprobs.token_logprobs[{i}]"
    lp = finite(value, where)
    if lp > LOGPROB_SLACK:
        raise ReplyError(f"{where} is {lp:g}, but a log probability is never above 0")
    return min(lp, 0.0)


def chat_reply(body: Any) -> tuple[str, str | None]:
    """The content and ``finish_reason`` of a ``/v1/chat/completions`` reply's one choice. A missing or null
    content is '' (a reasoning parser moved an answer cut off while thinking to ``reasoning_content``)."""
    choice = one_choice(body)
    message = field(choice, "message", dict, "choices[0]")
    content = field(message, "content", str, "choices[0].message", optional=True)
    finish = field(choice, "finish_reason", str, "choices[0]", optional=True)
    return content or "", finish


def vocab_limit(tokenizer: Any, model: str | None) -> int | None:
    """How many token ids the policy has: the model config's ``vocab_size`` (its embedding rows, which may
    be padded past the tokenizer), else the tokenizer's length; None when neither is known."""
    try:
        size = len(tokenizer)
    except TypeError:  # a stand-in tokenizer without a length
        size = None
    if model:
        try:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(model)
            size = max(size or 0, int(getattr(config, "vocab_size", 0) or 0)) or size
        except Exception as exc:  # noqa: BLE001 -- a tokenizer-only source has no model config; the tokenizer's length stands
            log.debug("no model config for %s (%s); token ids are checked against the tokenizer", model, exc)
    return size
