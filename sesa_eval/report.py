"""Eval reports: the paper's Tables 1 and 2, with diagnostics, hygiene and timing.

A report has one row per bank mode and one column per dataset plus the unweighted mean of the dataset
columns (the paper's headline), for three metrics kept apart: the judge score (exact match, else the LLM
judge; equal to EM with ``--judge none``), normalized exact match and token F1. Scores are percentages.
Every cell carries ``n``, the questions behind it. With seeds, a cell is the mean over seeds of the
per-seed score, ± the sample standard deviation (ddof = 1) over seeds; the mean column is computed per
seed first (mean over datasets), then averaged the same way.

Records with status ``error`` (the rollout could not run) are not scores: they are left out of every
cell and counted in the diagnostics, as are questions not yet run (an interrupted eval).

Every table comes twice: over all questions and over the answerable subset (questions whose gold answer
the eval's search can reach, :mod:`sesa_eval.answerability`); ``report["answerable"]`` holds the
subset's ``metrics`` and ``vs_off``. Each paired delta against mode off carries its power figure
(``mde``, :mod:`sesa_eval.paired`).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from sesa_eval.answerability import answerable_keys, summary
from sesa_eval.datasets import display_name
from sesa_eval.mcnemar import fmt_p
from sesa_eval.paired import paired_intervals
from sesa_graph.statuses import FAILURE_STATUSES

METRICS = {"judge": "score", "em": "em", "f1": "f1"}
METRIC_TITLES = {"judge": "Judge score", "em": "Exact match (normalized)", "f1": "Token F1"}
MODE_LABELS = {
    "closed": "closed (closed-book floor: no search)",
    "off": "off (SESA-Off: no skills)",
    "on": "on (SESA-On: bank skills)",
    "placebo": "placebo (unrelated skills)",
    "oracle": "oracle (open-book ceiling: the answer-bearing document given)",
}
SUBSETS = ("all", "answerable")


def headline_modes(modes: Iterable[str]) -> list[str]:
    """Bank modes in headline order: off, on, placebo, then any other sorted."""
    modes = set(modes)
    return [m for m in MODE_LABELS if m in modes] + sorted(modes - set(MODE_LABELS))


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: Sequence[float]) -> float | None:
    if len(xs) < 2:
        return None
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _seed_key(seed: Any) -> str:
    return "greedy" if seed is None else str(seed)


def aggregate(
    records: Sequence[Mapping[str, Any]], datasets: Sequence[str], modes: Sequence[str], field_name: str
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{mode: {dataset | "mean": cell}}`` for one record field (score, em, f1); see the module docstring."""
    per: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    errors: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        if r.get("status") == "error":
            errors[(r["mode"], r["dataset"])] += 1
            continue
        per[(r["mode"], r["dataset"], _seed_key(r.get("seed")))].append(
            100.0 * float(r.get(field_name) or 0.0)
        )
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for mode in modes:
        row: dict[str, dict[str, Any]] = {}
        seed_vals: dict[str, dict[str, float]] = defaultdict(dict)  # seed -> dataset -> value
        for ds in datasets:
            seeds = sorted({s for (m, d, s) in per if m == mode and d == ds})
            vals = [_mean(per[(mode, ds, s)]) for s in seeds]
            ns = [len(per[(mode, ds, s)]) for s in seeds]
            for s, v in zip(seeds, vals):
                seed_vals[s][ds] = v
            row[ds] = {
                "mean": _mean(vals) if vals else None,
                "std": _std(vals),
                "n": min(ns) if ns else 0,
                "n_max": max(ns) if ns else 0,
                "seeds": len(seeds),
                "errors": errors[(mode, ds)],
            }
        complete = [s for s, v in seed_vals.items() if len(v) == len(datasets)]
        means = [_mean(list(seed_vals[s].values())) for s in sorted(complete)]
        row["mean"] = {
            "mean": _mean(means) if means else None,
            "std": _std(means),
            "n": sum(row[ds]["n"] for ds in datasets),
            "seeds": len(means),
            "errors": sum(row[ds]["errors"] for ds in datasets),
        }
        out[mode] = row
    return out


def diagnostics(records: Sequence[Mapping[str, Any]], modes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per mode: how rollouts ended, turns and searches, how verdicts were reached."""
    out = {}
    for mode in modes:
        rs = [r for r in records if r["mode"] == mode]
        ok = [r for r in rs if r.get("status") != "error"]
        statuses = defaultdict(int)
        methods = defaultdict(int)
        for r in rs:
            statuses[r.get("status") or "?"] += 1
            methods[r.get("judge_method") or "none"] += 1
        out[mode] = {
            "records": len(rs),
            "status": dict(statuses),
            "judge_method": dict(methods),
            "answered_pct": 100.0 * statuses["answered"] / len(ok) if ok else None,
            "mean_turns": _mean([r.get("turns", 0) for r in ok]) if ok else None,
            "mean_searches": _mean([r.get("searches", 0) for r in ok]) if ok else None,
            "mean_skills": _mean([len(r.get("skill_ids") or []) for r in ok]) if ok else None,
        }
    return out


def vs_off(
    records: Sequence[Mapping[str, Any]],
    datasets: Sequence[str],
    modes: Sequence[str],
    keep: Collection[str] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """metric -> mode -> dataset (and 'mean') -> the paired delta against mode off with its 95% interval.

    Both modes answered the same questions with the same weights, so the paired interval is the honest
    yardstick for whether the bank moved a score ({} without mode off)."""
    if "off" not in modes:
        return {}
    return {
        m: {
            mode: paired_intervals(records, records, "off", mode, f, datasets, keep=keep)
            for mode in modes
            if mode != "off"
        }
        for m, f in METRICS.items()
    }


def build_report(
    records: Sequence[Mapping[str, Any]],
    *,
    settings: Any,
    datasets: Sequence[str],
    hygiene: Mapping[str, Any] | None = None,
    bank: Mapping[str, Any] | None = None,
    timing: Mapping[str, Any] | None = None,
    aborted: str | None = None,
    planned: int | None = None,
    answerability: Mapping[str, Mapping[str, Any]] | None = None,
    data: Mapping[str, Sequence[Any]] | None = None,
    no_oracle_doc: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The report dict (what report.json holds) from the records of one eval's plan; ``answerability``
    (``dataset/id`` -> row) and ``data`` (the questions) give the answerable subset."""
    modes = list(settings.bank_modes)
    datasets = list(datasets)
    done = sum(1 for r in records if r.get("status") != "error")
    keep = answerable_keys(answerability or {})
    sub = [r for r in records if f"{r['dataset']}/{r['id']}" in keep]
    # a dataset without an answerable question has no subset cell; the subset's Mean is over the others
    sub_ds = [d for d in datasets if any(k.startswith(f"{d}/") for k in keep)]
    return {
        "format": 1,
        "name": settings.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "model": settings.policy.model,
        "endpoint": settings.policy.base_url,
        "search": settings.search.model_dump(mode="json"),
        "judge": _judge_name(settings),
        "judge_fallback": getattr(settings, "judge_fallback", None),
        "decoding": (
            "greedy"
            if settings.seeds is None
            else f"{settings.seeds} seeds at temperature {settings.solver.temperature}"
        ),
        "max_turns": settings.solver.max_turns,
        "search_k": settings.solver.search_k,
        "bank": dict(bank) if bank else None,
        "datasets": datasets,
        "modes": modes,
        "limit": settings.limit,
        "subset": settings.subset,
        "metrics": {m: aggregate(records, datasets, modes, f) for m, f in METRICS.items()},
        "vs_off": vs_off(records, datasets, modes),
        "answerable": {
            "datasets": sub_ds,
            "metrics": {m: aggregate(sub, sub_ds, modes, f) for m, f in METRICS.items()},
            "vs_off": vs_off(records, sub_ds, modes, keep),
        },
        "answerability": summary(answerability or {}, data) if data is not None else None,
        "no_oracle_doc": dict(no_oracle_doc) if no_oracle_doc and "oracle" in modes else None,
        "diagnostics": diagnostics(records, modes),
        "hygiene": dict(hygiene) if hygiene else None,
        "timing": dict(timing) if timing else None,
        "planned": planned,
        "done": done,
        "complete": aborted is None and planned is not None and done == planned,
        "aborted": aborted,
    }


# ---- rendering -------------------------------------------------------------------------------------------


def fmt_cell(cell: Mapping[str, Any] | None, with_n: bool = True) -> str:
    """``41.2 (300)``, ``41.2 ± 1.3 (20×3)``, or ``–`` for no data."""
    if not cell or cell.get("mean") is None:
        return "–"
    s = f"{cell['mean']:.1f}"
    if cell.get("std") is not None:
        s += f" ± {cell['std']:.1f}"
    if with_n:
        n = str(cell["n"]) if cell.get("n_max", cell["n"]) == cell["n"] else f"{cell['n']}-{cell['n_max']}"
        s += f" ({n}×{cell['seeds']})" if cell.get("seeds", 1) > 1 else f" ({n})"
    return s


def fmt_delta(delta: float | None) -> str:
    """``+1.7``; a nonzero delta that rounds to 0.0 keeps two decimals, so its sign is not a puzzle."""
    if delta is None:
        return "–"
    return f"{delta:+.2f}" if delta and abs(delta) < 0.05 else f"{delta:+.1f}"


def _subset(report: Mapping[str, Any], subset: str) -> Mapping[str, Any]:
    """The part of a report that holds a subset's ``metrics`` and ``vs_off`` (reports before the
    answerable subset have none: {})."""
    return report if subset == "all" else report.get(subset) or {}


def metric_table(report: Mapping[str, Any], metric: str) -> list[list[str]]:
    """Header + one row per mode for one metric: all questions, then the answerable subset."""
    ds = report["datasets"]
    rows = [["mode", *[display_name(d) for d in ds], "Mean"]]
    for subset in SUBSETS:
        per_mode = _subset(report, subset).get("metrics", {}).get(metric, {})
        for mode in report["modes"]:
            if mode in per_mode:
                cells = per_mode[mode]
                label = mode if subset == "all" else f"{mode}, {subset}"
                rows.append([label, *[fmt_cell(cells.get(d)) for d in ds], fmt_cell(cells["mean"])])
    return rows


def fmt_paired(c: Mapping[str, Any] | None) -> str:
    """``-0.7 [-2.3, +1.0] mde 5.1 (300)``: delta, paired 95% interval, smallest detectable difference, n."""
    if not c:
        return "–"
    mde = f" mde {c['mde']:.1f}" if c.get("mde") is not None else " mde none" if "mde" in c else ""
    p = f" p {fmt_p(c['p'])}" if c.get("p") is not None else ""
    return f"{fmt_delta(c['delta'])} [{c['lo']:+.1f}, {c['hi']:+.1f}]{p}{mde} ({c['n']})"


def vs_off_table(report: Mapping[str, Any], metrics: Sequence[str] | None = None) -> list[list[str]]:
    """Header + one row per (subset, mode, metric): :func:`fmt_paired` per dataset and for the mean."""
    ds = report["datasets"]
    rows = [["", *[display_name(d) for d in ds], "Mean"]]
    for subset in SUBSETS:
        for metric, per_mode in _subset(report, subset).get("vs_off", {}).items():
            if metrics is not None and metric not in metrics:
                continue
            for mode, cells in per_mode.items():
                fmt = [fmt_paired(cells.get(d)) for d in [*ds, "mean"]]
                what = METRIC_TITLES[metric].split(" (")[0].lower()
                rows.append([f"{mode} - off, {what}" + ("" if subset == "all" else f", {subset}"), *fmt])
    return rows


def answerability_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """Header + one row per dataset and 'All': questions, reach_question, reach_oracle, answerable (% (n))."""
    a = report.get("answerability") or {}
    rows = [["dataset", "questions", "reach_question", "reach_oracle", "answerable", "oracle not run"]]
    missing = report.get("no_oracle_doc") or {}
    for ds in [*report["datasets"], "all"]:
        c = a.get(ds)
        if not c:
            continue

        def pct(k: str, c: Mapping[str, int] = c) -> str:
            return f"{100.0 * c[k] / c['known']:.1f} ({c[k]})" if c["known"] else "–"

        n = str(c["n"]) + (f", {c['n'] - c['known']} unknown" if c["known"] < c["n"] else "")
        gone = sum(missing.values()) if ds == "all" else missing.get(ds)
        name = "All" if ds == "all" else display_name(ds)
        rows.append([name, n, pct("reach_question"), pct("reach_oracle"), pct("answerable"), _num(gone)])
    return rows


def _num(x: int | None) -> str:
    return "–" if x is None else str(x)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def diagnostic_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """Header + one row per mode; one count column per failure status of :mod:`sesa_graph.statuses`."""
    ended = FAILURE_STATUSES
    rows = [
        [
            "bank mode",
            "records",
            "answered %",
            *ended,
            "turns",
            "searches",
            "skills/q",
            "LLM-judged",
            "judge unavailable",
        ]
    ]
    for mode in report["modes"]:
        d = report["diagnostics"][mode]
        st, jm = d["status"], d["judge_method"]
        rows.append(
            [
                mode,
                str(d["records"]),
                _pct(d["answered_pct"]),
                *(str(st.get(name, 0)) for name in ended),
                _pct(d["mean_turns"]),
                _pct(d["mean_searches"]),
                _pct(d["mean_skills"]),
                str(jm.get("llm", 0)),
                str(jm.get("judge_unavailable", 0)),
            ]
        )
    return rows


def _judge_name(settings: Any) -> str:
    """'none', the endpoint URL, 'policy', or the fixed model's key and the model it serves."""
    judge = settings.judge
    if judge.kind == "openai":
        return str(judge.base_url)
    if judge.kind == "model":
        serve = settings.models[judge.endpoint].serve
        return f"{judge.endpoint} ({serve.model})" if serve is not None else judge.endpoint
    return judge.kind
