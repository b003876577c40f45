"""Rewards: small pure functions of the judge's verdict (solver) and the solver group's success rate p
(proposer).

Default lambda, and why: frontier shaping gives every frontier question (0 < p < 1) a reward
``4p(1-p) > 0`` (with G=5 the smallest is 0.64, at p=0.2 or 0.8, the largest 1.0 at p=0.5), so any
lambda > 0 already ranks trivial (p=1) and impossible (p=0) questions strictly below every frontier
question. We take ``DEFAULT_LAMBDA = 0.5`` so that the order is also strict one level further down:
invalid proposal (``FORMAT_PENALTY = -1.0``) < trivial/impossible (-0.5) < any frontier question (> 0).
A proposer that writes a well-formed but degenerate question is thus better off than one that breaks the
format, and both are clearly worse than one that hits the frontier.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

DEFAULT_LAMBDA = 0.5
FORMAT_PENALTY = -1.0

ProposerRewardKind = Literal["frontier", "one_minus_p", "intermediate"]
PROPOSER_REWARD_KINDS: tuple[ProposerRewardKind, ...] = ("frontier", "one_minus_p", "intermediate")


class HasScore(Protocol):
    score: float


def solver_reward(verdict: HasScore | None) -> float:
    """The judge's score (1.0 correct, 0.0 wrong); no verdict (no answer was judged) is 0.0.

    >>> from types import SimpleNamespace
    >>> solver_reward(SimpleNamespace(score=1.0)), solver_reward(None)
    (1.0, 0.0)
    """
    return 0.0 if verdict is None else float(verdict.score)


def success_rate(scores: Iterable[float]) -> float:
    """Mean solver score over one question's group of G samples: the p the proposer rewards use.

    >>> success_rate([1.0, 0.0, 0.0, 1.0, 0.0])
    0.4
    """
    scores = list(scores)
    if not scores:
        raise ValueError("success_rate needs at least one solver score (got an empty group)")
    return sum(scores) / len(scores)


def _check_p(p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a success rate must lie in [0, 1], got {p}")
    return p


def frontier_reward(p: float, lam: float = DEFAULT_LAMBDA, low: float = 0.0, high: float = 1.0) -> float:
    """``-lam`` when the solver group always or never succeeds, else ``4 * (low + p) * (high - p)``.

    With the defaults the frontier part peaks at p=0.5 and is positive on all of (0, 1); a ``high`` below
    1 makes questions solved more often than ``high`` negative as well.

    >>> frontier_reward(0.4), frontier_reward(1.0), frontier_reward(0.0, lam=1.0)
    (0.96, -0.5, -1.0)
    """
    if lam < 0:
        raise ValueError(f"lam is a penalty size and must be >= 0, got {lam}")
    p = _check_p(p)
    if p == 0.0 or p == 1.0:
        return -lam
    return 4.0 * (low + p) * (high - p)


def one_minus_p(p: float) -> float:
    """Adversarial baseline: the proposer earns what the solver misses (impossible questions score best).

    >>> one_minus_p(0.2)
    0.8
    """
    return 1.0 - _check_p(p)


def intermediate(p: float) -> float:
    """1.0 for a frontier question (0 < p < 1), else 0.0: frontier shaping without a graded peak.

    >>> intermediate(0.2), intermediate(1.0)
    (1.0, 0.0)
    """
    p = _check_p(p)
    return float(0.0 < p < 1.0)


def proposer_reward(
    p: float | None,
    kind: ProposerRewardKind = "frontier",
    *,
    lam: float = DEFAULT_LAMBDA,
    low: float = 0.0,
    high: float = 1.0,
    format_penalty: float = FORMAT_PENALTY,
) -> float:
    """The proposer's reward; ``p is None`` means the proposal was invalid (malformed, spoiler, not
    answerable) and never reached the solver, so it gets ``format_penalty``.

    >>> proposer_reward(0.6), proposer_reward(0.6, "one_minus_p"), proposer_reward(None)
    (0.96, 0.4, -1.0)
    """
    if kind not in PROPOSER_REWARD_KINDS:
        raise ValueError(f"unknown proposer reward kind {kind!r}; choose one of {PROPOSER_REWARD_KINDS}")
    if p is None:
        return format_penalty
    if kind == "frontier":
        return frontier_reward(p, lam=lam, low=low, high=high)
    if kind == "one_minus_p":
        return one_minus_p(p)
    return intermediate(p)
