"""Seed-level statistics for an ablation: each arm's runs (training seeds, and an eval's own ``--seeds``)
kept apart, a two-level bootstrap over runs then question clusters, and the per-run McNemar tests.

:mod:`sesa_eval.paired` averages a question's seeds, so its interval covers question sampling only. Here
one *replicate* is one run's scores (one training seed x one eval seed), and B - A is resampled in two
levels: each arm's replicates with replacement (the run-to-run spread), then the questions, or whole
clusters of them (questions sharing an article or an answer, as probe v2 records them: resampled one by
one they would pass for independent). With one replicate per arm and one question per cluster it is the
plain paired bootstrap.

Resampling k replicates with replacement sees (k - 1)/k of their variance: half at k = 2, the usual number
of training seeds here. Each arm's replicates are therefore spread about their mean by sqrt(k / (k - 1))
before they are resampled (the inflation of Davison & Hinkley 1997, section 3.8), so the replicate level
enters at its unbiased size; the interval is then clipped to what a difference of scores can be.

Even so, two replicates cannot show a spread larger than their own. :func:`pooled_seed_t` gives the other
reading a reviewer asks for: a t-interval whose spread is pooled over every trained arm's seeds, with the
degrees of freedom that pooling has (one per arm at two seeds), on the fixed question set.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from sesa_eval.mcnemar import exact_p, mde_exact, mid_p
from sesa_eval.records import RETRY_STATUSES

LEVEL = 0.95

Replicates = list[dict[str, float]]  # one {question id: score} per replicate


def replicates(
    runs: Sequence[Iterable[Mapping[str, Any]]], mode: str, field: str, dataset: str
) -> Replicates:
    """One ``{question id: score}`` per (run, eval seed) of ``dataset`` in ``mode``: ``runs`` holds each
    run's records (records that could not run left out)."""
    out: Replicates = []
    for records in runs:
        by_seed: dict[Any, dict[str, float]] = defaultdict(dict)
        for r in records:
            if (
                r.get("dataset") == dataset
                and r.get("mode") == mode
                and r.get("status") not in RETRY_STATUSES
            ):
                by_seed[r.get("seed", 0)][str(r["id"])] = float(r.get(field) or 0.0)
        out += [by_seed[s] for s in sorted(by_seed, key=str)]
    return out


def _unbiased_spread(sums: np.ndarray) -> np.ndarray:
    """Replicates x clusters sums with each replicate's deviation from the mean scaled by sqrt(k/(k-1))."""
    k = len(sums)
    if k < 2:
        return sums
    mean = sums.mean(axis=0)
    return mean + np.sqrt(k / (k - 1)) * (sums - mean)


def two_level(
    a: Replicates,
    b: Replicates,
    clusters: Mapping[str, Any] | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, float] | None:
    """B - A in points over the questions every replicate of both arms holds: ``delta`` (mean over
    replicates and questions), the two-level bootstrap 95% interval ``lo``/``hi`` (replicates, then
    clusters of ``clusters`` (question id -> cluster; default: each question its own)), ``n`` questions,
    ``clusters`` and the replicates per arm (spread to their unbiased variance, see the module's doc). None
    without a shared question."""
    if not a or not b:
        return None
    shared = sorted(set.intersection(*(set(r) for r in (*a, *b))))
    if not shared:
        return None
    ma = np.array([[r[q] for q in shared] for r in a])  # replicates x questions
    mb = np.array([[r[q] for q in shared] for r in b])
    keys = [clusters.get(q, f"q:{q}") if clusters else q for q in shared]
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    member = np.array([ids[k] for k in keys])
    n_cl = len(ids)
    # per replicate and cluster: the sum of scores; and each cluster's size
    sa = np.zeros((len(a), n_cl))
    sb = np.zeros((len(b), n_cl))
    np.add.at(sa.T, member, ma.T)
    np.add.at(sb.T, member, mb.T)
    sa, sb = _unbiased_spread(sa), _unbiased_spread(sb)
    size = np.bincount(member, minlength=n_cl).astype(float)
    rng = np.random.default_rng(seed)
    ra = rng.integers(0, len(a), size=(n_boot, len(a)))
    rb = rng.integers(0, len(b), size=(n_boot, len(b)))
    rc = rng.integers(0, n_cl, size=(n_boot, n_cl))
    count = size[rc].sum(axis=1)
    mean_a = np.stack([sa[ra[i]][:, rc[i]].sum(axis=1).mean() for i in range(n_boot)]) / count
    mean_b = np.stack([sb[rb[i]][:, rc[i]].sum(axis=1).mean() for i in range(n_boot)]) / count
    boots = 100.0 * (mean_b - mean_a)
    lo, hi = np.clip(np.quantile(boots, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2]), -100.0, 100.0)
    delta = 100.0 * float(mb.mean() - ma.mean())
    return {
        "n": len(shared),
        "clusters": n_cl,
        "replicates_a": len(a),
        "replicates_b": len(b),
        "delta": delta,
        "lo": float(lo),
        "hi": float(hi),
    }


def per_run_tests(a: Replicates, b: Replicates) -> list[dict[str, Any]]:
    """The exact McNemar test of each replicate of B against A's replicate of the same index (A's only
    one, for a base evaluated once), over the questions both hold: b, c, p, p_mid and the exact mde."""
    out = []
    for i, rb in enumerate(b):
        ra = a[i % len(a)] if a else {}
        shared = sorted(set(ra) & set(rb))
        if not shared:
            continue
        if any(ra[q] not in (0.0, 1.0) or rb[q] not in (0.0, 1.0) for q in shared):
            continue
        nb = sum(1 for q in shared if rb[q] > ra[q])
        nc = sum(1 for q in shared if ra[q] > rb[q])
        psi = (nb + nc) / len(shared)
        out.append(
            {
                "n": len(shared),
                "b": nb,
                "c": nc,
                "p": exact_p(nb, nc),
                "p_mid": mid_p(nb, nc),
                "mde": mde_exact(len(shared), psi),
            }
        )
    return out


def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| < t) = ``level`` at ``df`` degrees of freedom: the half-width multiplier of a
    two-sided ``level`` interval."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if df < 1:  # scipy answers nan at df <= 0 rather than saying what is wrong
        raise ValueError(f"df must be at least 1, got {df}")
    return float(stats.t.ppf((1 + level) / 2, df))


def pooled_seed_t(
    seeds: Mapping[str, Sequence[float]], a: str, b: str, fixed: Collection[str] = ()
) -> dict[str, float] | None:
    """``b`` - ``a`` in points with a seed-level t-interval: ``seeds`` holds each arm's EM per replicate
    (points, as :func:`em_per_replicate` gives); the seed sd is pooled over every arm not in ``fixed`` that
    has two or more replicates (df = the sum of their k - 1). An arm in ``fixed`` (an untrained base) adds
    no seed variance. ``delta``, ``lo``, ``hi``, ``sd`` and ``df``; None without degrees of freedom or a
    varying side."""
    pooled = [np.asarray(v, float) for arm, v in seeds.items() if arm not in fixed and len(v) >= 2]
    df = sum(len(v) - 1 for v in pooled)
    weight = sum(1.0 / len(seeds[arm]) for arm in (a, b) if arm not in fixed and seeds.get(arm))
    if not df or not weight or not seeds.get(a) or not seeds.get(b):
        return None
    sd = float(np.sqrt(sum(((v - v.mean()) ** 2).sum() for v in pooled) / df))
    delta = float(np.mean(seeds[b]) - np.mean(seeds[a]))
    half = t_quantile(LEVEL, df) * sd * np.sqrt(weight)
    lo, hi = np.clip([delta - half, delta + half], -100.0, 100.0)
    return {"delta": delta, "lo": float(lo), "hi": float(hi), "sd": sd, "df": df}


def em_per_replicate(reps: Replicates, ids: Iterable[str] | None = None) -> list[float]:
    """Each replicate's mean score in points (over ``ids`` when given)."""
    keep = set(ids) if ids is not None else None
    return [
        100.0 * float(np.mean([v for q, v in r.items() if keep is None or q in keep] or [0.0])) for r in reps
    ]


def connected(keys: Sequence[Sequence[str]]) -> list[int]:
    """Per item, the id of its cluster: items linked by a shared key, transitively (numbered by first
    appearance). Probe questions keyed by their articles and answer give the clusters the bootstrap
    resamples whole."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for ks in keys:
        for k in ks[1:]:
            parent[root(k)] = root(ks[0])
    ids: dict[str, int] = {}
    return [ids.setdefault(root(ks[0]), len(ids)) for ks in keys]
