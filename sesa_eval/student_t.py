"""Student's t distribution at whole degrees of freedom, for seed-level intervals (no scipy here, as in
:mod:`sesa_eval.mcnemar`).

The two-sided probability P(|T| < t) has a closed form for whole df (Abramowitz & Stegun 26.7.3-4); its
inverse is found by bisection, which is exact to far below a printed decimal.
"""

from __future__ import annotations

import math


def central_prob(t: float, df: int) -> float:
    """P(|T| < t) for T with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"df must be a whole number >= 1, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        series, term = 0.0, 1.0
        for k in range(1, (df - 1) // 2 + 1):  # 1 + 2/3 c^2 + (2*4)/(3*5) c^4 + ... (df - 1)/2 terms
            series += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return (2 / math.pi) * (theta + s * math.cos(theta) * series)
    series, term = 0.0, 1.0
    for k in range(1, df // 2 + 1):  # 1 + 1/2 c^2 + (1*3)/(2*4) c^4 + ... df/2 terms
        series += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return s * series


def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| < t) = ``level``: the half-width multiplier of a two-sided ``level`` interval."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    lo, hi = 0.0, 1.0
    while central_prob(hi, df) < level:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if central_prob(mid, df) < level else (lo, mid)
    return (lo + hi) / 2
