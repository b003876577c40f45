"""Paired bootstrap intervals for B - A over the questions two evals both ran.

Two bank modes of one eval (or two evals of the same questions) answer the same questions, so their
scores are paired: resampling questions, not the two sides apart, gives a far tighter interval than two
independent ones would. Per question the score is the mean over its seeds; per dataset the delta is the
mean paired difference in percentage points; the mean row resamples every dataset at once and takes the
unweighted mean of the dataset deltas, like the report's headline.

Next to each interval, the exact McNemar test of the same pairs (:mod:`sesa_eval.mcnemar`): ``b`` and ``c``
count the (question, seed) pairs B got right and A wrong and the reverse, ``p`` is the exact two-sided
p-value and ``p_mid`` its mid-p version. Several seeds per question pool their pairs, which treats a
question's seeds as independent (they are not, so that p is optimistic); the seed-level statistics are
:mod:`sesa_eval.resample`'s two-level bootstrap. A score that is not 0/1 (F1, a judge score) gets no test.

Power: ``mde`` is the smallest difference (in points, either sign) the exact McNemar test detects with
two-sided alpha 0.05 and 80% power at the comparison's ``n`` and discordant rate ``psi``
(:func:`sesa_eval.mcnemar.mde_exact`; ``psi`` is the mean squared per-question difference, which is the
share of questions the two sides scored differently for 0/1 scores). It is never a value no exact test
can reach: at n = 110 with no discordant pair seen it is about 7 points, not the normal approximation's
2.5. None when no difference reaches 80% power at that n. The mean row's mde stays the normal
approximation for the unweighted mean of the datasets: ``2.80 * sqrt(sum_d psi_d / n_d) / D``
(``psi_d`` floored at ``1 / n_d``), as no single test covers a mean of several datasets.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sesa_eval.mcnemar import exact_p, mde_exact, mid_p
from sesa_eval.records import RECORDS, RETRY_STATUSES, parse_records

LEVEL = 0.95
Z_SUM = 1.959964 + 0.841621  # z of a two-sided 0.05 test + z of 80% power


def read_records(eval_dir: Path) -> list[dict[str, Any]] | None:
    """The latest record of each key in ``eval_dir/records.jsonl`` (None if there is none).

    Read only: a torn last line (an eval killed mid-write, or still running) is skipped, not cut off."""
    path = Path(eval_dir) / RECORDS
    if not path.is_file():
        return None
    return list(parse_records(path.read_bytes(), path).values())


def per_question(
    records: Iterable[Mapping[str, Any]], mode: str, field: str, keep: Collection[str] | None = None
) -> dict[str, dict[str, float]]:
    """dataset -> question id -> the mean over seeds of ``field`` (records that could not run left out;
    with ``keep``, only the questions whose ``dataset/id`` it holds)."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if keep is not None and f"{r.get('dataset')}/{r.get('id')}" not in keep:
            continue
        if r.get("mode") == mode and r.get("status") not in RETRY_STATUSES:
            acc[r["dataset"]][str(r["id"])].append(float(r.get(field) or 0.0))
    return {ds: {q: sum(v) / len(v) for q, v in qs.items()} for ds, qs in acc.items()}


def paired_intervals(
    records_a: Sequence[Mapping[str, Any]],
    records_b: Sequence[Mapping[str, Any]],
    mode_a: str,
    mode_b: str,
    field: str,
    datasets: Sequence[str],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    keep: Collection[str] | None = None,
) -> dict[str, dict[str, float]]:
    """``dataset`` (and ``"mean"`` when every dataset has pairs) -> n, delta, lo, hi, mde in points and
    the discordant rate ``psi`` (see the module docstring); ``keep``: only those ``dataset/id`` questions.

    Datasets without a shared question are left out."""
    a, b = per_question(records_a, mode_a, field, keep), per_question(records_b, mode_b, field, keep)
    rng = np.random.default_rng(seed)
    lo_q, hi_q = (1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2
    out: dict[str, dict[str, float]] = {}
    boots: list[np.ndarray] = []
    for ds in datasets:
        shared = sorted(set(a.get(ds, {})) & set(b.get(ds, {})))
        if not shared:
            continue
        d = 100.0 * np.array([b[ds][q] - a[ds][q] for q in shared])
        bs = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
        boots.append(bs)
        psi = float(np.mean((d / 100.0) ** 2))
        out[ds] = {
            **_interval(len(d), float(d.mean()), bs, lo_q, hi_q),
            "psi": psi,
            "mde": mde_exact(len(d), psi),
            **discordance(records_a, records_b, mode_a, mode_b, field, ds, set(shared)),
        }
    if datasets and len(boots) == len(datasets):
        bs = np.mean(boots, axis=0)
        var = sum(max(out[ds]["psi"], 1.0 / out[ds]["n"]) / out[ds]["n"] for ds in datasets)
        n = int(sum(out[ds]["n"] for ds in datasets))
        out["mean"] = {
            **_interval(n, float(np.mean([out[ds]["delta"] for ds in datasets])), bs, lo_q, hi_q),
            "psi": float(np.mean([out[ds]["psi"] for ds in datasets])),
            "mde": 100.0 * Z_SUM * math.sqrt(var) / len(datasets),
        }
    return out


def min_detectable(psi: float, n: int) -> float:
    """The smallest paired difference in points detectable at ``n`` pairs with discordant rate ``psi``
    (two-sided alpha 0.05, 80% power; ``psi`` floored at ``1/n``, see the module docstring)."""
    return 100.0 * Z_SUM * math.sqrt(max(psi, 1.0 / n) / n)


def _interval(n: int, delta: float, boots: np.ndarray, lo_q: float, hi_q: float) -> dict[str, float]:
    lo, hi = np.quantile(boots, [lo_q, hi_q])
    return {"n": n, "delta": delta, "lo": float(lo), "hi": float(hi)}


def discordance(
    records_a: Iterable[Mapping[str, Any]],
    records_b: Iterable[Mapping[str, Any]],
    mode_a: str,
    mode_b: str,
    field: str,
    dataset: str,
    ids: Collection[str],
) -> dict[str, Any]:
    """``b``, ``c``, ``p`` and ``p_mid`` of the exact McNemar test over the (question, seed) pairs of
    ``dataset`` both sides ran (see the module docstring); ``p`` None when a score is not 0 or 1."""

    def scores(records: Iterable[Mapping[str, Any]], mode: str) -> dict[tuple[str, Any], float]:
        return {
            (str(r["id"]), r.get("seed", 0)): float(r.get(field) or 0.0)
            for r in records
            if r.get("dataset") == dataset
            and r.get("mode") == mode
            and r.get("status") not in RETRY_STATUSES
            and str(r.get("id")) in ids
        }

    a, b = scores(records_a, mode_a), scores(records_b, mode_b)
    pairs = [(a[k], b[k]) for k in sorted(set(a) & set(b), key=str)]
    if not pairs or any(x not in (0.0, 1.0) or y not in (0.0, 1.0) for x, y in pairs):
        return {"b": None, "c": None, "p": None, "p_mid": None}
    nb = sum(1 for x, y in pairs if y > x)
    nc = sum(1 for x, y in pairs if x > y)
    return {"b": nb, "c": nc, "p": exact_p(nb, nc), "p_mid": mid_p(nb, nc)}
