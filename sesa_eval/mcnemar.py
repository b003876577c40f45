"""The exact McNemar test for paired right/wrong outcomes, its mid-p version, and the smallest difference
it can detect.

Of the questions two sides scored differently, ``b`` went B's way and ``c`` A's. Under "no difference"
each such pair goes either way with probability 1/2, so ``b`` is Binomial(b + c, 1/2):

- exact two-sided p = min(1, 2 * P(X <= min(b, c)));
- mid-p = exact p - P(X = min(b, c)) (half the tail's own point on each side; closer to nominal size,
  not guaranteed to stay under it).

The binomial is computed exactly in log space (``math.lgamma``), no scipy.

``mde_exact`` is the smallest true difference (in points) the exact test rejects at two-sided alpha 0.05
with 80% power over ``n`` pairs whose discordant rate is at least ``psi``: discordant pairs
D ~ Binomial(n, psi'), each going B's way with probability (psi' + delta) / (2 psi'), with
psi' = max(psi, delta) (a difference of delta needs at least that much discordance). At n = 110 with no
discordant pair seen it is about 8 points: the exact test needs at least 6 discordant pairs, all one way,
to reject at all, so no test can see a 2.5-point difference there (the normal approximation's floor said
it could).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

ALPHA = 0.05
POWER = 0.80


_LGAMMA = np.zeros(1)


def _log_factorials(n: int) -> np.ndarray:
    """log k! for k = 0..n (a table grown as needed)."""
    global _LGAMMA
    if len(_LGAMMA) <= n:
        _LGAMMA = np.array([math.lgamma(k + 1) for k in range(max(n + 1, 2 * len(_LGAMMA)))])
    return _LGAMMA


def _log_pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    """log Binomial(n, p) pmf at ``k`` (p in [0, 1])."""
    k = np.asarray(k, dtype=int)
    lf = _log_factorials(n)
    out = lf[n] - lf[k] - lf[n - k]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = out + np.where(k > 0, k * np.log(p), 0.0) + np.where(n - k > 0, (n - k) * np.log1p(-p), 0.0)
    return out


def _pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    return np.exp(_log_pmf(k, n, p))


def exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` vs ``c`` discordant pairs (1.0 when there are none)."""
    n, m = b + c, min(b, c)
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * _pmf(np.arange(m + 1), n, 0.5).sum()))


def mid_p(b: int, c: int) -> float:
    """The mid-p version of :func:`exact_p`."""
    n, m = b + c, min(b, c)
    if n == 0:
        return 1.0
    tail = _pmf(np.arange(m + 1), n, 0.5)
    return float(min(1.0, 2.0 * tail.sum() - tail[-1]))


@lru_cache(maxsize=4096)
def reject_from(d: int, alpha: float = ALPHA) -> int | None:
    """The least ``b`` (>= d/2) with ``exact_p(b, d - b) <= alpha`` at ``d`` discordant pairs; None if even
    all ``d`` one way is not significant."""
    for b in range((d + 1) // 2, d + 1):
        if exact_p(b, d - b) <= alpha:
            return b
    return None


def power(n: int, psi: float, delta: float, alpha: float = ALPHA) -> float:
    """Power of the exact test over ``n`` pairs, discordant rate ``psi``, true difference ``delta`` (as
    proportions; ``delta <= psi``)."""
    if psi <= 0 or delta > psi + 1e-12:
        return 0.0
    p_b = min(1.0, (psi + delta) / (2 * psi))
    ds = np.arange(n + 1)
    w = _pmf(ds, n, min(psi, 1.0))
    total = 0.0
    for d, wd in zip(ds, w):
        if wd < 1e-12:
            continue
        k = reject_from(int(d), alpha)
        if k is None:
            continue
        ks = np.arange(d + 1)
        pb = _pmf(ks, int(d), p_b)
        total += wd * float(pb[ks >= k].sum() + pb[ks <= d - k].sum())
    return total


def mde_exact(n: int, psi: float, alpha: float = ALPHA, target: float = POWER) -> float | None:
    """The smallest difference in points the exact test detects (see the module docstring); None when no
    difference up to 100 points reaches ``target`` power at this ``n``."""
    if n < 1:
        return None

    def ok(delta: float) -> bool:
        return power(n, max(psi, delta), delta, alpha) >= target

    if not ok(1.0):
        return None
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return 100.0 * hi


def fmt_p(p: float) -> str:
    """A p-value to two significant digits, small ones as ``<0.001``."""
    return "<0.001" if p < 0.001 else f"{p:.2g}" if p < 0.1 else f"{p:.2f}"
