"""The policy-client contract every node talks to.

A request carries prompt token ids (or chat messages for a first turn, rendered with the policy's chat
template) and sampling parameters; a result carries the completion text, its token ids and the log
probability of each sampled token. Multi-turn rollouts are rebuilt from token ids, never from text, so
that what the trainer scores is exactly what the policy sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from tools.errors import ServiceError


class PolicyUnavailableError(ServiceError, RuntimeError):
    """The policy endpoint could not be reached after retries; the message names it."""


class BadReplyError(PolicyUnavailableError):
    """A model endpoint answered with something its API does not allow (not JSON, a missing or ill-typed
    field, a token id outside the vocabulary, a log probability that is not finite, more tokens than asked
    for) or refused the request (HTTP 4xx); the message names the URL and the field. Never retried: the
    same request gets the same answer."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion. ``temperature == 0`` means greedy decoding."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass
class GenerationRequest:
    """Exactly one of ``prompt_ids`` and ``messages`` is set."""

    prompt_ids: list[int] | None = None
    messages: list[dict[str, str]] | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)

    def __post_init__(self) -> None:
        if (self.prompt_ids is None) == (self.messages is None):
            raise ValueError("GenerationRequest needs exactly one of prompt_ids or messages")


@dataclass
class GenerationResult:
    """One completion. ``token_ids`` end at (and include) the token that completed a stop string."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    prompt_ids: list[int]
    finish_reason: Literal["stop", "length", "eos"]
    stop_string: str | None = None


@runtime_checkable
class PolicyClient(Protocol):
    """Anything that can turn requests into results. ``tokenizer`` is a HF tokenizer for the policy."""

    name: str
    tokenizer: Any

    async def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]: ...

    def encode_messages(self, messages: list[dict[str, str]]) -> list[int]: ...

    def encode_text(self, text: str) -> list[int]: ...
