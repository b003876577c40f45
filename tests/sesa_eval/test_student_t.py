"""sesa_eval.student_t against the printed t table (two-sided 95% and 80%) and the normal limit."""

import pytest

from sesa_eval.student_t import central_prob, t_quantile

# df: (t for two-sided 95%, t for two-sided 80%), as every statistics textbook prints them
TABLE = {1: (12.706, 3.078), 2: (4.303, 1.886), 3: (3.182, 1.638), 4: (2.776, 1.533), 10: (2.228, 1.372)}


@pytest.mark.parametrize("df", sorted(TABLE))
def test_quantiles_match_the_table(df):
    t95, t80 = TABLE[df]
    assert t_quantile(0.95, df) == pytest.approx(t95, abs=5e-4)
    assert t_quantile(0.80, df) == pytest.approx(t80, abs=5e-4)


def test_large_df_tends_to_the_normal_and_bad_arguments_are_named():
    assert t_quantile(0.95, 2000) == pytest.approx(1.960, abs=2e-3)
    assert central_prob(0.0, 3) == 0.0 and central_prob(1e9, 3) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="df must be"):
        central_prob(1.0, 0)
    with pytest.raises(ValueError, match="level must be"):
        t_quantile(1.0, 3)
