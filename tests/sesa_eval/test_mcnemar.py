"""The exact McNemar test, its mid-p and the exact mde against hand-computed cases (issue 32's audit)."""

import math

import pytest

from sesa_eval.mcnemar import exact_p, fmt_p, mde_exact, mid_p, power, reject_from


def _binom_tail(m: int, n: int) -> float:
    return sum(math.comb(n, k) for k in range(m + 1)) / 2**n


def test_exact_p_matches_the_binomial_by_hand():
    # 19 vs 4: 2 * (1 + 23 + 253 + 1771 + 8855) / 2^23 = 0.0026
    assert exact_p(19, 4) == pytest.approx(2 * 10903 / 2**23) == pytest.approx(0.0026, abs=5e-5)
    assert exact_p(4, 19) == exact_p(19, 4)  # two-sided
    assert exact_p(14, 5) == pytest.approx(0.0636, abs=5e-5)
    assert exact_p(19, 13) == pytest.approx(2 * _binom_tail(13, 32)) == pytest.approx(0.377, abs=1e-3)
    assert exact_p(0, 0) == 1.0 and exact_p(5, 5) == 1.0


def test_mid_p_takes_half_the_observed_point_off_each_tail():
    n, m = 23, 4
    assert mid_p(19, 4) == pytest.approx(2 * _binom_tail(m, n) - math.comb(n, m) / 2**n)
    assert mid_p(19, 4) < exact_p(19, 4)
    assert mid_p(3, 3) == pytest.approx(1.0)


def test_rejection_needs_six_one_way_pairs():
    # 5 of 5 one way: p = 2/32 = 0.0625 > 0.05; 6 of 6: 2/64 = 0.031
    assert reject_from(5) is None and reject_from(6) == 6
    assert reject_from(23) == 17 and exact_p(17, 6) <= 0.05 < exact_p(16, 7)


def test_power_matches_the_audit():
    # SESA vs SSP: 32 discordant of 330, +1.8 points -> about 13% power
    assert power(330, 32 / 330, 0.018) == pytest.approx(0.13, abs=0.02)
    assert power(330, 32 / 330, 0.0) < 0.05  # the test's size stays under alpha


def test_mde_is_never_below_what_an_exact_test_can_reach():
    # n = 110, no discordant pair seen: the normal floor said 2.5; an exact test needs >= 6 of 110 (5.5)
    m = mde_exact(110, 0.0)
    assert m is not None and 100 * 6 / 110 < m < 10
    assert power(110, m / 100, m / 100) >= 0.8 > power(110, 0.9 * m / 100, 0.9 * m / 100)
    # the audit's arithmetic: about 2,350 questions resolve +1.8 at the SESA-vs-SSP discordance
    assert mde_exact(2350, 32 / 330) == pytest.approx(1.8, abs=0.15)
    assert mde_exact(5, 0.0) is None  # no difference up to 100 points is detectable with 5 pairs


def test_fmt_p():
    assert fmt_p(0.0026) == "0.0026" and fmt_p(0.38) == "0.38" and fmt_p(1e-5) == "<0.001"
