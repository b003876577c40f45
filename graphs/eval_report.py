"""Eval reports (the paper's Tables 1 and 2) and the comparison of two evals.

A report has one row per bank mode and one column per dataset plus the unweighted mean of the dataset
columns (the paper's headline), for three metrics kept apart: the judge score (exact match, else the LLM
judge; equal to EM with ``--judge none``), normalized exact match and token F1. Scores are percentages.
Every cell carries ``n``, the questions behind it. With seeds, a cell is the mean over seeds of the
per-seed score, ± the sample standard deviation (ddof = 1) over seeds; the mean column is computed per
seed first (mean over datasets), then averaged the same way.

Records with status ``error`` (the rollout could not run) are not scores: they are left out of every
cell and counted in the diagnostics, as are questions not yet run (an interrupted eval).
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphs.eval_data import display_name, order_datasets

METRICS = {"judge": "score", "em": "em", "f1": "f1"}
METRIC_TITLES = {"judge": "Judge score", "em": "Exact match (normalized)", "f1": "Token F1"}
MODE_LABELS = {"off": "off (SESA-Off: no skills)", "on": "on (SESA-On: bank skills)",
               "placebo": "placebo (unrelated skills)"}


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: Sequence[float]) -> float | None:
    if len(xs) < 2:
        return None
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _seed_key(seed: Any) -> str:
    return "greedy" if seed is None else str(seed)


def aggregate(records: Sequence[Mapping[str, Any]], datasets: Sequence[str], modes: Sequence[str],
              field_name: str) -> dict[str, dict[str, dict[str, Any]]]:
    """``{mode: {dataset | "mean": cell}}`` for one record field (score, em, f1); see the module docstring."""
    per: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    errors: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        if r.get("status") == "error":
            errors[(r["mode"], r["dataset"])] += 1
            continue
        per[(r["mode"], r["dataset"], _seed_key(r.get("seed")))].append(100.0 * float(r.get(field_name) or 0.0))
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
            row[ds] = {"mean": _mean(vals) if vals else None, "std": _std(vals), "n": min(ns) if ns else 0,
                       "n_max": max(ns) if ns else 0, "seeds": len(seeds), "errors": errors[(mode, ds)]}
        complete = [s for s, v in seed_vals.items() if len(v) == len(datasets)]
        means = [_mean(list(seed_vals[s].values())) for s in sorted(complete)]
        row["mean"] = {"mean": _mean(means) if means else None, "std": _std(means),
                       "n": sum(row[ds]["n"] for ds in datasets), "seeds": len(means),
                       "errors": sum(row[ds]["errors"] for ds in datasets)}
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
            "records": len(rs), "status": dict(statuses), "judge_method": dict(methods),
            "answered_pct": 100.0 * statuses["answered"] / len(ok) if ok else None,
            "mean_turns": _mean([r.get("turns", 0) for r in ok]) if ok else None,
            "mean_searches": _mean([r.get("searches", 0) for r in ok]) if ok else None,
            "mean_skills": _mean([len(r.get("skill_ids") or []) for r in ok]) if ok else None,
        }
    return out


def build_report(records: Sequence[Mapping[str, Any]], *, settings: Any, datasets: Sequence[str],
                 hygiene: Mapping[str, Any] | None = None, bank: Mapping[str, Any] | None = None,
                 timing: Mapping[str, Any] | None = None, aborted: str | None = None,
                 planned: int | None = None) -> dict[str, Any]:
    """The report dict (what report.json holds) from the records of one eval's plan."""
    modes = list(settings.bank_modes)
    datasets = list(datasets)
    done = sum(1 for r in records if r.get("status") != "error")
    return {
        "format": 1,
        "name": settings.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "model": settings.policy.model,
        "endpoint": settings.policy.base_url,
        "search": settings.search.model_dump(mode="json"),
        "judge": settings.judge.kind if settings.judge.kind != "openai" else settings.judge.base_url,
        "decoding": ("greedy" if settings.seeds is None
                     else f"{settings.seeds} seeds at temperature {settings.solver.temperature}"),
        "max_turns": settings.solver.max_turns,
        "bank": dict(bank) if bank else None,
        "datasets": datasets,
        "modes": modes,
        "limit": settings.limit,
        "metrics": {m: aggregate(records, datasets, modes, f) for m, f in METRICS.items()},
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


def metric_table(report: Mapping[str, Any], metric: str) -> list[list[str]]:
    """Header + one row per mode for one metric."""
    ds = report["datasets"]
    rows = [["bank mode", *[display_name(d) for d in ds], "Mean"]]
    for mode in report["modes"]:
        cells = report["metrics"][metric][mode]
        rows.append([mode, *[fmt_cell(cells[d]) for d in ds], fmt_cell(cells["mean"])])
    return rows


def _md_table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def render_markdown(report: Mapping[str, Any]) -> str:
    """report.md: settings, the three metric tables, diagnostics, data hygiene, timing, status."""
    judge = report["judge"]
    judge_note = ("exact match only (--judge none): equal to EM" if judge == "none"
                  else f"exact match, else the LLM judge ({judge})")
    bank = report.get("bank")
    lines = [
        f"# Eval `{report['name']}`", "",
        f"- model: `{report['model']}`" + (f" at {report['endpoint']}" if report.get("endpoint") else ""),
        f"- search: {report['search']['backend']} over `{report['search']['corpus']}`, k={report['search']['k']}",
        f"- decoding: {report['decoding']}, at most {report['max_turns']} turns",
        f"- judge: {judge_note}",
        f"- bank: `{bank['path']}` version {bank['version']}, {bank['n_skills']} skills" if bank else "- bank: none",
        f"- datasets: {', '.join(report['datasets'])}" + (f" (first {report['limit']} each)" if report.get("limit")
                                                          else ""),
        "", "Scores are percentages; `(n)` is the number of questions behind each cell"
        + (" (`n×seeds` with seeds; ± is the std over seeds)" if "seed" in report["decoding"] else "")
        + ". Mean = unweighted mean of the dataset columns.", "",
    ]
    if not report.get("complete"):
        lines += [f"**INCOMPLETE: {report['done']} of {report['planned']} rollouts done"
                  + (f"; stopped: {report['aborted']}" if report.get("aborted") else "")
                  + ". Rerun the same command to resume.**", ""]
    for metric in METRICS:
        title = METRIC_TITLES[metric] + (f" ({judge_note})" if metric == "judge" else "")
        lines += [f"## {title}", "", _md_table(metric_table(report, metric)), ""]
    lines += ["## Diagnostics", "", _md_table(diagnostic_rows(report)), ""]
    lines += hygiene_lines(report.get("hygiene"))
    t = report.get("timing") or {}
    if t:
        lines += ["## Timing", "",
                  (f"- this invocation: {t.get('computed', 0)} rollouts computed, {t.get('rejudged', 0)} re-judged, "
                  f"{t.get('cached', 0)} from cache"
                  + (f", {t['stale_rerun']} cached ones run again because the bank now gives their questions "
                     "other skills" if t.get("stale_rerun") else "")),
                  f"- setup {t.get('setup_s')} s, rollouts {t.get('run_s')} s"
                  + (f", {t['rollouts_per_minute']} rollouts/minute = {t['questions_per_minute']} questions/minute "
                     "in every mode and seed" if t.get("rollouts_per_minute") else ""), ""]
    return "\n".join(lines)


def diagnostic_rows(report: Mapping[str, Any]) -> list[list[str]]:
    rows = [["bank mode", "records", "answered %", "max_turns", "malformed", "errors", "turns", "searches",
             "skills/q", "LLM-judged", "judge unavailable"]]
    for mode in report["modes"]:
        d = report["diagnostics"][mode]
        st, jm = d["status"], d["judge_method"]
        rows.append([mode, str(d["records"]), _pct(d["answered_pct"]), str(st.get("max_turns", 0)),
                     str(st.get("malformed", 0)), str(st.get("error", 0)), _pct(d["mean_turns"]),
                     _pct(d["mean_searches"]), _pct(d["mean_skills"]), str(jm.get("llm", 0)),
                     str(jm.get("judge_unavailable", 0))])
    return rows


def hygiene_lines(h: Mapping[str, Any] | None) -> list[str]:
    if not h:
        return []
    verdict = "clean" if h["clean"] else "**EVAL QUESTIONS FOUND in training/bank text**"
    lines = ["## Data hygiene", "", (f"{h['questions']} eval questions checked: {verdict}. A hit is a question "
             "found as an exact substring, or as whole words after normalization."), ""]
    for s in h["sections"]:
        lines.append(f"- {s['source']}: {s['texts']} texts; {s['exact']} exact, {s['normalized']} normalized hits")
        for hit in s["hits"][:5]:
            lines.append(f"  - {hit['dataset']}/{hit['id']} ({hit['match']}, in {hit['source']}): {hit['question']}")
    for s in h["not_checked"]:
        lines.append(f"- not checked: {s}")
    return lines + [""]


def write_report(out_dir: Path, report: Mapping[str, Any]) -> None:
    from sesa_graph.fsutil import write_json_atomic, write_text_atomic

    write_json_atomic(Path(out_dir) / "report.json", report)
    write_text_atomic(Path(out_dir) / "report.md", render_markdown(report))


# ---- compare ---------------------------------------------------------------------------------------------


class CompareError(ValueError):
    """An eval reference that cannot be compared; the message says why."""


def load_report(ref: str | Path) -> tuple[dict[str, Any], str | None, str]:
    """(report, mode or None, label) from ``DIR``, ``DIR:MODE`` or a report.json path."""
    text, mode = str(ref), None
    head, sep, tail = text.rpartition(":")
    if sep and tail in ("off", "on", "placebo"):
        text, mode = head, tail
    p = Path(text)
    path = p if p.is_file() else p / "report.json"
    if not path.is_file():
        raise CompareError(f"{ref}: no report.json there (run `sesa eval` first, or give its output directory)")
    report = json.loads(path.read_text())
    if mode is not None and mode not in report["modes"]:
        raise CompareError(f"{ref}: mode {mode!r} is not in that eval (it has {', '.join(report['modes'])})")
    return report, mode, str(ref)


@dataclass
class CompareRow:
    dataset: str
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    delta: float | None
    regression: bool
    within_noise: bool
    note: str = ""


@dataclass
class Comparison:
    metric: str
    a_label: str
    b_label: str
    rows: list[CompareRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Settings that differ between A and B and make the deltas mean less (judge, decoding, turns)."""

    @property
    def regressions(self) -> list[str]:
        return [r.dataset for r in self.rows if r.regression]

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "a": self.a_label, "b": self.b_label, "regressions": self.regressions,
                "rows": [vars(r) for r in self.rows], "warnings": self.warnings}


def compare_reports(a: str | Path, b: str | Path, metric: str = "judge", tolerance: float = 0.0) -> list[Comparison]:
    """Per-dataset deltas B - A (percentage points) for each bank mode both evals ran (or the modes
    named with ``DIR:MODE``). A dataset where B is below A by more than ``tolerance`` is a regression;
    with seeds on both sides, a delta within the combined std is marked as within seed noise."""
    if metric not in METRICS:
        raise CompareError(f"unknown metric {metric!r}; choose {', '.join(METRICS)}")
    ra, ma, la = load_report(a)
    rb, mb, lb = load_report(b)
    if ma or mb:
        pairs = [(ma or mb, mb or ma)]
        for r, m, lab in ((ra, pairs[0][0], la), (rb, pairs[0][1], lb)):
            if m not in r["modes"]:
                raise CompareError(f"{lab}: mode {m!r} is not in that eval (it has {', '.join(r['modes'])})")
    else:
        pairs = [(m, m) for m in ra["modes"] if m in rb["modes"]]
        if not pairs:
            raise CompareError(f"{la} ran modes {ra['modes']}, {lb} ran {rb['modes']}: none in common; "
                               "name them, e.g. A:off B:on")
    datasets = order_datasets([*ra["datasets"], *rb["datasets"]]) + ["mean"]
    out = []
    for mode_a, mode_b in pairs:
        ca, cb = ra["metrics"][metric][mode_a], rb["metrics"][metric][mode_b]
        label_a = f"{la}:{mode_a}" if ma is None else la
        label_b = f"{lb}:{mode_b}" if mb is None else lb
        cmp_ = Comparison(metric, label_a, label_b, warnings=_setting_differences(ra, rb, metric))
        for ds in datasets:
            x, y = ca.get(ds), cb.get(ds)
            have = x and y and x.get("mean") is not None and y.get("mean") is not None
            delta = y["mean"] - x["mean"] if have else None
            regression = delta is not None and delta < -tolerance
            noise = (have and x.get("std") is not None and y.get("std") is not None
                     and abs(delta) <= math.hypot(x["std"], y["std"]))
            note = []
            if not have:
                note.append("only in one eval" if (x or y) else "missing")
            elif x.get("n") != y.get("n"):
                note.append(f"n differs ({x['n']} vs {y['n']})")
            if ds == "mean" and ra["datasets"] != rb["datasets"]:
                note.append("different datasets")
            cmp_.rows.append(CompareRow(ds, x, y, delta, regression, bool(noise), "; ".join(note)))
        out.append(cmp_)
    return out


def _setting_differences(ra: Mapping[str, Any], rb: Mapping[str, Any], metric: str) -> list[str]:
    keys = ["decoding", "max_turns", "limit"] + (["judge"] if metric == "judge" else [])
    return [f"{k} differs: A {ra.get(k)!r}, B {rb.get(k)!r}" for k in keys if ra.get(k) != rb.get(k)]


def render_comparison(c: Comparison) -> str:
    """Markdown table of one comparison; regressions are flagged with ▼."""
    lines = [f"### {METRIC_TITLES[c.metric]}: B = `{c.b_label}` vs A = `{c.a_label}`", "",
             "| dataset | A | B | B - A | |", "|---|---:|---:|---:|---|"]
    for r in c.rows:
        name = "Mean" if r.dataset == "mean" else display_name(r.dataset)
        d = "–" if r.delta is None else f"{r.delta:+.1f}"
        flag = ("▼ regression" + (" (within seed noise)" if r.within_noise else "")) if r.regression else ""
        flag = "; ".join(x for x in (flag, r.note) if x)
        lines.append(f"| {name} | {fmt_cell(r.a)} | {fmt_cell(r.b)} | {d} | {flag} |")
    regs = [display_name(d) for d in c.regressions if d != "mean"]
    lines += ["", f"B is below A on: {', '.join(regs)}" if regs else "B is not below A on any dataset."]
    lines += [f"Note: {w}" for w in c.warnings] + [""]
    return "\n".join(lines)
