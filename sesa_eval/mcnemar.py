"""The exact McNemar test for paired right/wrong outcomes, its mid-p version, and the smallest difference
it can detect.

Of the questions two sides scored differently, ``b`` went B's way and ``c`` A's. Under "no difference"
each such pair goes either way with probability 1/2, so ``b`` is Binomial(b + c, 1/2):

- exact two-sided p = min(1, 2 * P(X <= min(b, c)));
- mid-p = exact p - P(X = min(b, c)) (half the tail's own point on each side; closer to nominal size,
  not guaranteed to stay under it).

The binomial and the two-sided test are ``scipy.stats``' (``binom``, ``binomtest``).

``mde_exact`` is the smallest true difference (in points) the exact test rejects at two-sided alpha 0.05
with 80% power over ``n`` pairs whose discordant rate is at least ``psi``: discordant pairs
D ~ Binomial(n, psi'), each going B's way with probability (psi' + delta) / (2 psi'), with
psi' = max(psi, delta) (a difference of delta needs at least that much discordance). At n = 110 with no
discordant pair seen it is about 8 points: the exact test needs at least 6 discordant pairs, all one way,
to reject at all, so no test can see a 2.5-point difference there (the normal approximation's floor said
it could).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.80


def exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` vs ``c`` discordant pairs (1.0 when there are none)."""
    if b + c == 0:
        return 1.0
    return float(stats.binomtest(b, b + c, 0.5).pvalue)


def mid_p(b: int, c: int) -> float:
    """The mid-p version of :func:`exact_p`."""
    n, m = b + c, min(b, c)
    if n == 0:
        return 1.0
    # from the tail itself, not exact_p: at b == c exact_p is capped at 1 before the point comes off
    return float(min(1.0, 2.0 * stats.binom.cdf(m, n, 0.5) - stats.binom.pmf(m, n, 0.5)))


@lru_cache(maxsize=4096)
def reject_from(d: int, alpha: float = ALPHA) -> int | None:
    """The least ``b`` (>= d/2) with ``exact_p(b, d - b) <= alpha`` at ``d`` discordant pairs; None if even
    all ``d`` one way is not significant."""
    bs = np.arange((d + 1) // 2, d + 1)
    # exact_p's two-sided tail for b >= d/2, every b in one call: a binomtest per b made mde_exact crawl
    hits = np.flatnonzero(np.minimum(1.0, 2.0 * stats.binom.cdf(d - bs, d, 0.5)) <= alpha)
    return int(bs[hits[0]]) if len(hits) else None


def power(n: int, psi: float, delta: float, alpha: float = ALPHA) -> float:
    """Power of the exact test over ``n`` pairs, discordant rate ``psi``, true difference ``delta`` (as
    proportions; ``delta <= psi``)."""
    if psi <= 0 or delta > psi + 1e-12:
        return 0.0
    p_b = min(1.0, (psi + delta) / (2 * psi))
    w = stats.binom.pmf(np.arange(n + 1), n, min(psi, 1.0))
    at = {int(d): k for d in np.flatnonzero(w >= 1e-12) if (k := reject_from(int(d), alpha)) is not None}
    if not at:
        return 0.0
    ds, ks = np.array(list(at)), np.array(list(at.values()))
    # B's way at least k times, or A's way at least k times: a rejection on either side
    reject = stats.binom.sf(ks - 1, ds, p_b) + stats.binom.cdf(ds - ks, ds, p_b)
    return float(np.sum(w[ds] * reject))


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
