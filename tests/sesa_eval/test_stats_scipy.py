"""The statistics on scipy.stats against the printed t table and against what the hand-rolled versions
they replaced gave (data/stats_before_scipy.json, frozen before the change: Student t quantiles, exact
McNemar p and mid-p, the rejection points, the exact test's power and mde, the pooled seed t-interval)."""

import json
from pathlib import Path

import pytest

from sesa_eval.mcnemar import exact_p, mde_exact, mid_p, power, reject_from
from sesa_eval.resample import pooled_seed_t, t_quantile

FROZEN = json.loads((Path(__file__).parent / "data" / "stats_before_scipy.json").read_text())
REL = 1e-9

# df: (t for two-sided 95%, t for two-sided 80%), as every statistics textbook prints them
TABLE = {1: (12.706, 3.078), 2: (4.303, 1.886), 3: (3.182, 1.638), 4: (2.776, 1.533), 10: (2.228, 1.372)}


@pytest.mark.parametrize("df", sorted(TABLE))
def test_t_quantiles_match_the_printed_table(df):
    t95, t80 = TABLE[df]
    assert t_quantile(0.95, df) == pytest.approx(t95, abs=5e-4)
    assert t_quantile(0.80, df) == pytest.approx(t80, abs=5e-4)


def test_t_quantile_tends_to_the_normal_and_bad_arguments_are_named():
    assert t_quantile(0.95, 2000) == pytest.approx(1.960, abs=2e-3)
    with pytest.raises(ValueError, match="df must be"):
        t_quantile(0.95, 0)
    with pytest.raises(ValueError, match="level must be"):
        t_quantile(1.0, 3)


def test_t_quantiles_match_the_frozen_ones():
    for level, df, want in FROZEN["t_quantile"]:
        assert t_quantile(level, df) == pytest.approx(want, rel=REL), (level, df)


def test_mcnemar_p_values_match_the_frozen_ones():
    grid = FROZEN["mcnemar_grid"]
    for b in range(grid["b_c_max"] + 1):
        for c in range(grid["b_c_max"] + 1):
            assert exact_p(b, c) == pytest.approx(grid["exact_p"][b][c], rel=REL), (b, c)
            assert mid_p(b, c) == pytest.approx(grid["mid_p"][b][c], rel=REL), (b, c)
    for b, c, want_p, want_mid in FROZEN["mcnemar_large"]:
        assert exact_p(b, c) == pytest.approx(want_p, rel=REL), (b, c)
        assert mid_p(b, c) == pytest.approx(want_mid, rel=REL), (b, c)


def test_rejection_points_power_and_mde_match_the_frozen_ones():
    for d, alpha, want in FROZEN["reject_from"]:
        assert reject_from(d, alpha) == want, (d, alpha)
    for n, psi, delta, want in FROZEN["power"]:
        assert power(n, psi, delta) == pytest.approx(want, rel=REL, abs=1e-12), (n, psi, delta)
    for n, psi, want in FROZEN["mde_exact"]:
        assert mde_exact(n, psi) == (None if want is None else pytest.approx(want, rel=REL)), (n, psi)


def test_pooled_seed_t_matches_the_frozen_one():
    for case in FROZEN["pooled_seed_t"]:
        got = pooled_seed_t(case["seeds"], case["a"], case["b"], fixed=case["fixed"])
        assert got == (None if case["out"] is None else pytest.approx(case["out"], rel=REL)), case
