"""The two-level (runs, then question clusters) bootstrap and the per-run McNemar tests."""

import numpy as np
import pytest

from sesa_eval.resample import em_per_replicate, per_run_tests, pooled_seed_t, replicates, two_level


def _recs(scores, mode="off", ds="probe", seed=0):
    return [
        {"dataset": ds, "id": str(i), "mode": mode, "em": float(x), "seed": seed}
        for i, x in enumerate(scores)
    ]


def test_replicates_keep_runs_and_eval_seeds_apart():
    runs = [_recs([1, 0]) + _recs([0, 0], seed=1), _recs([1, 1]) + _recs([1, 1], mode="on")]
    reps = replicates(runs, "off", "em", "probe")
    assert reps == [{"0": 1.0, "1": 0.0}, {"0": 0.0, "1": 0.0}, {"0": 1.0, "1": 1.0}]
    assert em_per_replicate(reps) == [50.0, 0.0, 100.0]


def test_degenerate_case_gives_a_point_interval():
    # every question moves from wrong to right in every run: no resampling can change the difference
    a = [{str(i): 0.0 for i in range(20)}] * 2
    b = [{str(i): 1.0 for i in range(20)}] * 3
    out = two_level(a, b)
    assert out["delta"] == out["lo"] == out["hi"] == pytest.approx(100.0)
    assert (out["n"], out["replicates_a"], out["replicates_b"]) == (20, 2, 3)


def test_one_replicate_and_singleton_clusters_is_the_plain_paired_bootstrap():
    rng = np.random.default_rng(1)
    xa, xb = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    a, b = [dict(enumerate(map(float, xa)))], [dict(enumerate(map(float, xb)))]
    a, b = [{str(k): v for k, v in a[0].items()}], [{str(k): v for k, v in b[0].items()}]
    out = two_level(a, b, n_boot=4000)
    d = 100.0 * (xb - xa)
    se = d.std() / np.sqrt(len(d))
    assert out["delta"] == pytest.approx(d.mean())
    assert out["lo"] == pytest.approx(d.mean() - 1.96 * se, abs=1.0)
    assert out["hi"] == pytest.approx(d.mean() + 1.96 * se, abs=1.0)


def test_run_to_run_spread_widens_the_interval():
    # B's two runs disagree (one all right, one all wrong): averaged per question the pairs look identical
    # (every question +50), but resampling runs sees the spread
    a = [{str(i): 0.0 for i in range(50)}]
    b = [{str(i): 1.0 for i in range(50)}, {str(i): 0.0 for i in range(50)}]
    out = two_level(a, b)
    assert out["delta"] == pytest.approx(50.0)
    # two runs spread by sqrt(2): 50 -/+ 70.7, the upper end clipped to the largest possible difference
    assert out["lo"] == pytest.approx(50.0 - 50.0 * np.sqrt(2)) and out["hi"] == pytest.approx(100.0)


def test_the_replicate_level_enters_at_its_unbiased_variance():
    # each run scores one value on every question, so all the spread is between runs
    a = [{str(i): 0.0 for i in range(40)}]

    def half_width(runs):
        out = two_level(a, [{str(i): x for i in range(40)} for x in runs], n_boot=20000)
        assert out["delta"] == pytest.approx(100.0 * np.mean(runs))
        return (out["hi"] - out["lo"]) / 2

    # two runs: the resampled means' extremes sit one sample sd (ddof 1) from the mean, not 1/sqrt(2) of it
    assert half_width([0.2, 0.6]) == pytest.approx(100.0 * np.std([0.2, 0.6], ddof=1))
    # eight runs: near the textbook 1.96 s / sqrt(k)
    runs = [0.1, 0.3, 0.2, 0.6, 0.4, 0.5, 0.35, 0.25]
    assert half_width(runs) == pytest.approx(1.96 * 100.0 * np.std(runs, ddof=1) / np.sqrt(8), rel=0.1)


def test_clusters_are_resampled_whole():
    # 10 clusters of 10 identical questions: resampled by question the interval is too narrow
    a = [{str(i): 0.0 for i in range(100)}]
    b = [{str(i): float((i // 10) % 2) for i in range(100)}]
    clusters = {str(i): i // 10 for i in range(100)}
    by_q, by_c = two_level(a, b, n_boot=3000), two_level(a, b, clusters, n_boot=3000)
    assert by_c["clusters"] == 10 and by_q["clusters"] == 100
    assert (by_c["hi"] - by_c["lo"]) > 2.5 * (by_q["hi"] - by_q["lo"])


def test_per_run_tests_pair_runs_by_index_and_reuse_a_single_base():
    base = [{str(i): 0.0 for i in range(30)}]
    b = [{**{str(i): 1.0 for i in range(19)}, **{str(i): 0.0 for i in range(19, 30)}}] * 2
    tests = per_run_tests(base, b)
    assert len(tests) == 2 and tests[0]["b"] == 19 and tests[0]["c"] == 0
    assert tests[0]["p"] == pytest.approx(2 / 2**19)
    assert per_run_tests(base, [{"0": 0.5}]) == []  # not 0/1: no test


def test_pooled_seed_t_pools_trained_arms_and_keeps_the_base_fixed():
    em = {"base": [27.3], "ssp": [33.3, 31.0], "nobank": [34.3, 26.3], "sesa": [16.3, 24.7]}
    # pooled by hand: each pair's squared deviations sum to (x1 - x2)^2 / 2, one df per arm
    sd = ((2.3**2 + 8.0**2 + 8.4**2) / 2 / 3) ** 0.5
    out = pooled_seed_t(em, "ssp", "sesa", fixed=("base",))
    assert (out["df"], out["sd"]) == (3, pytest.approx(sd))
    assert out["delta"] == pytest.approx(20.5 - 32.15)
    # t(0.975, 3) = 3.182 (every table); both arms' means carry seed noise: sqrt(1/2 + 1/2)
    assert out["hi"] - out["delta"] == pytest.approx(3.1824 * sd, rel=1e-4)
    vs_base = pooled_seed_t(em, "base", "ssp", fixed=("base",))
    assert vs_base["hi"] - vs_base["delta"] == pytest.approx(3.1824 * sd / 2**0.5, rel=1e-4)
    # one seed per arm: nothing to pool, no interval
    assert pooled_seed_t({"base": [27.3], "sesa": [16.3]}, "base", "sesa", fixed=("base",)) is None
    assert pooled_seed_t(em, "base", "base", fixed=("base",)) is None
