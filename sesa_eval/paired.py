"""Paired bootstrap intervals for B - A over the questions two evals both ran.

Two bank modes of one eval (or two evals of the same questions) answer the same questions, so their
scores are paired: resampling questions, not the two sides apart, gives a far tighter interval than two
independent ones would. Per question the score is the mean over its seeds; per dataset the delta is the
mean paired difference in percentage points; the mean row resamples every dataset at once and takes the
unweighted mean of the dataset deltas, like the report's headline.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sesa_eval.records import RECORDS, RETRY_STATUSES, parse_records

LEVEL = 0.95


def read_records(eval_dir: Path) -> list[dict[str, Any]] | None:
    """The latest record of each key in ``eval_dir/records.jsonl`` (None if there is none).

    Read only: a torn last line (an eval killed mid-write, or still running) is skipped, not cut off."""
    path = Path(eval_dir) / RECORDS
    if not path.is_file():
        return None
    return list(parse_records(path.read_bytes(), path).values())


def per_question(records: Iterable[Mapping[str, Any]], mode: str, field: str) -> dict[str, dict[str, float]]:
    """dataset -> question id -> the mean over seeds of ``field`` (records that could not run left out)."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
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
) -> dict[str, dict[str, float]]:
    """``dataset`` (and ``"mean"`` when every dataset has pairs) -> n, delta, lo, hi in points.

    Datasets without a shared question are left out."""
    a, b = per_question(records_a, mode_a, field), per_question(records_b, mode_b, field)
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
        out[ds] = _interval(len(d), float(d.mean()), bs, lo_q, hi_q)
    if datasets and len(boots) == len(datasets):
        bs = np.mean(boots, axis=0)
        out["mean"] = _interval(
            int(sum(v["n"] for v in out.values())),
            float(np.mean([out[ds]["delta"] for ds in datasets])),
            bs,
            lo_q,
            hi_q,
        )
    return out


def _interval(n: int, delta: float, boots: np.ndarray, lo_q: float, hi_q: float) -> dict[str, float]:
    lo, hi = np.quantile(boots, [lo_q, hi_q])
    return {"n": n, "delta": delta, "lo": float(lo), "hi": float(hi)}
