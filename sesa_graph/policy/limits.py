"""How long a call to a model endpoint may take before the endpoint counts as down: one rule for every client
(policies, fixed models, the judge's and the distiller's endpoints, the start-up probe).

Each attempt has a connect timeout (short: a dead server refuses or never accepts within seconds) and a read
timeout (long enough for a real generation), retries back off exponentially, and the whole call -- attempts
and pauses together -- never outlasts ``deadline_s``: a server that accepts and never answers fails in
``deadline_s``, not in ``(retries + 1) * timeout_s``. The error after the last attempt names the URL, the
attempts, the time spent and the settings to raise.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sesa_graph.policy.base import BadReplyError, PolicyUnavailableError
from tools.replies import RefusedError, ReplyError, RetriableStatus

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class CallLimits:
    """The bounds of one call; ``setting`` is the config section the error tells the user to edit."""

    timeout_s: float = 90.0
    connect_timeout_s: float = 5.0
    retries: int = 4
    backoff_s: float = 0.5
    deadline_s: float = 120.0
    setting: str = ""
    deadline_key: str = "deadline_s"  # the field that sets deadline_s (the judge's is its timeout_s)

    @classmethod
    def of(cls, cfg: Any, setting: str = "") -> CallLimits:
        """The limits a config section (PolicyConfig, EndpointConfig) gives."""
        return cls(
            timeout_s=cfg.timeout_s,
            connect_timeout_s=cfg.connect_timeout_s,
            retries=cfg.retries,
            backoff_s=cfg.backoff_s,
            deadline_s=cfg.deadline_s,
            setting=setting,
        )

    def httpx_timeout(self, budget_s: float) -> Any:
        import httpx

        read = min(self.timeout_s, budget_s)
        return httpx.Timeout(read, connect=min(self.connect_timeout_s, read))

    def hint(self, timed_out: bool) -> str:
        where = f"{self.setting}." if self.setting else ""
        deadline = f"{where}{self.deadline_key}"
        if not timed_out:
            return f"is the server up and the URL right? ({where}retries={self.retries}, {deadline}={self.deadline_s:g}s)"
        if self.deadline_key == "timeout_s":
            return f"if the server is only slow, raise {deadline} (now {self.deadline_s:g}s)"
        return (
            f"if the server is only slow, raise {where}timeout_s (per attempt, now {self.timeout_s:g}s) "
            f"and {deadline} (per call, now {self.deadline_s:g}s)"
        )

    @property
    def what(self) -> str:
        """The endpoint as an error names it: by its config section when known."""
        return f"{self.setting} endpoint" if self.setting else "policy endpoint"


def _retriable() -> tuple[type[BaseException], ...]:
    import httpx
    import openai

    return (
        httpx.TransportError,  # refused, reset, cut short, DNS, and httpx's own timeouts
        RetriableStatus,  # HTTP 5xx and 429
        openai.APIConnectionError,  # the same, through the OpenAI SDK
        openai.InternalServerError,
        openai.RateLimitError,
        TimeoutError,  # our own bound on the attempt: a server that trickles bytes never trips httpx's
    )


def _is_timeout(exc: BaseException) -> bool:
    import httpx
    import openai

    return isinstance(exc, (TimeoutError, httpx.TimeoutException, openai.APITimeoutError))


def _describe(exc: BaseException, budget_s: float) -> str:
    if _is_timeout(exc):
        return f"no answer within {budget_s:.3g}s"
    if isinstance(exc, RetriableStatus):
        return str(exc)
    cause = exc.__cause__ or exc.__context__
    detail = f" ({type(cause).__name__}: {cause})" if cause is not None and str(cause) else ""
    return f"{type(exc).__name__}: {exc}{detail}"


async def call_with_retries(
    call: Callable[[Any], Awaitable[T]],
    *,
    what: str,
    url: str,
    limits: CallLimits,
    gone: Callable[[], str | None] | None = None,
) -> T:
    """``await call(httpx_timeout)`` within ``limits``; a :class:`PolicyUnavailableError` after the last
    attempt. A reply that no retry can fix (a 4xx, a malformed body: a :class:`~tools.replies.ReplyError`)
    is a :class:`BadReplyError` at once, naming ``url``; other errors pass through unchanged.
    ``gone`` says why no retry can help (a server process that exited) -- then the call stops at once."""
    retriable = _retriable()
    t0 = time.monotonic()
    end = t0 + limits.deadline_s
    attempts, timed_out, last = 0, False, ""
    while True:
        budget = end - time.monotonic()
        attempts += 1
        try:
            async with asyncio.timeout(min(limits.timeout_s, budget)):
                return await call(limits.httpx_timeout(budget))
        except retriable as exc:
            timed_out = _is_timeout(exc)
            last = _describe(exc, min(limits.timeout_s, budget))
        except ReplyError as exc:
            said = "refused the request" if isinstance(exc, RefusedError) else "sent a bad reply"
            raise BadReplyError(f"{what} {url} {said}: {exc}") from None
        reason = gone() if gone is not None else None
        left = end - time.monotonic()
        delay = limits.backoff_s * 2 ** (attempts - 1) * (0.5 + random.random())
        # an attempt squeezed into the deadline's last moments would only blur the error
        if reason or attempts > limits.retries or delay + min(limits.timeout_s, 1.0) > left:
            break
        log.warning("%s %s: %s; retry %d/%d in %.1fs", what, url, last, attempts, limits.retries, delay)
        await asyncio.sleep(delay)
    elapsed = time.monotonic() - t0
    msg = f"{what} {url} failed after {attempts} attempt{'s' * (attempts != 1)} in {elapsed:.1f}s (last: {last})"
    if reason:
        raise PolicyUnavailableError(f"{msg}: {reason}")
    raise PolicyUnavailableError(f"{msg}; {limits.hint(timed_out)}")
