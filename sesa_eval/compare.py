"""Comparing two evals (or two bank modes of one): per-dataset deltas B - A, regressions flagged.

A delta alone cannot tell a regression from noise: 300 questions at a 2% score move by a point when
two answers flip. When both evals' records are at hand and they ran the same questions, every delta gets
a paired bootstrap 95% interval over those questions (:mod:`sesa_eval.paired`), and a regression whose
interval holds 0 is marked as not significant. With seeds on both sides, a delta within the combined
seed std is marked as within seed noise.

Each comparison comes twice, over all questions and over the answerable subset (the questions both
evals' searches can reach, :mod:`sesa_eval.answerability`; evals from before answerability have no such
subset and get only the first), and every interval carries its power figure ``mde``, the smallest
difference the paired comparison could detect (:mod:`sesa_eval.paired`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sesa_eval.answerability import answerable_keys, read_answerability
from sesa_eval.datasets import display_name, order_datasets
from sesa_eval.mcnemar import fmt_p
from sesa_eval.paired import paired_intervals, read_records
from sesa_eval.report import METRIC_TITLES, METRICS, SUBSETS, fmt_cell, fmt_delta
from sesa_eval.settings import BANK_MODES
from tools.errors import UserError
from tools.inputs import read_bytes_bounded, regular_file


class CompareError(UserError, ValueError):
    """An eval reference that cannot be compared; the message says why."""


def load_report(ref: str | Path) -> tuple[dict[str, Any], str | None, str, Path]:
    """(report, mode or None, label, the eval's directory) from ``DIR``, ``DIR:MODE`` or a report.json path."""
    text, mode = str(ref), None
    head, sep, tail = text.rpartition(":")
    if sep and tail in BANK_MODES:
        text, mode = head, tail
    p = Path(text)
    path = p if p.is_file() else p / "report.json"
    if path.exists() and not path.is_file():
        regular_file(path, "report")  # (a UserError saying what it is instead)
    if not path.is_file():
        raise CompareError(
            f"{ref}: no report.json there (run `sesa eval` first, or give its output directory)"
        )
    try:
        report = json.loads(read_bytes_bounded(path, "report"))
    except ValueError as exc:  # (a UserError from the read is reported as it is)
        if isinstance(exc, UserError):
            raise
        raise CompareError(f"{path}: not valid JSON ({exc}); rerun `sesa eval` to write it again") from None
    modes = report.get("modes") if isinstance(report, dict) else None
    if not (isinstance(modes, list) and all(isinstance(m, str) for m in modes)):
        raise CompareError(
            f"{path}: not a report `sesa eval` writes (no list of bank modes under 'modes'); rerun "
            "`sesa eval` to write it again"
        )
    if mode is not None and mode not in report["modes"]:
        raise CompareError(f"{ref}: mode {mode!r} is not in that eval (it has {', '.join(report['modes'])})")
    return report, mode, str(ref), path.parent


@dataclass
class CompareRow:
    dataset: str
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    delta: float | None
    regression: bool
    within_noise: bool
    note: str = ""
    ci: tuple[float, float] | None = None
    """Paired bootstrap 95% interval of B - A over ``n_paired`` shared questions (None: no records)."""
    n_paired: int | None = None
    mde: float | None = None
    """The smallest B - A the exact McNemar test could detect at ``n_paired`` (80% power, alpha 0.05)."""
    p: float | None = None
    """The exact McNemar p-value of the same pairs (None: not 0/1 scores, or no records)."""

    @property
    def significant(self) -> bool | None:
        """Whether the interval leaves 0 out (None without an interval)."""
        return None if self.ci is None else not (self.ci[0] <= 0.0 <= self.ci[1])


@dataclass
class Comparison:
    metric: str
    a_label: str
    b_label: str
    rows: list[CompareRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Settings that differ between A and B and make the deltas mean less (judge, decoding, turns)."""
    subset: str = "all"
    """``all`` questions or the ``answerable`` ones."""

    @property
    def regressions(self) -> list[str]:
        return [r.dataset for r in self.rows if r.regression]

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "a": self.a_label,
            "b": self.b_label,
            "subset": self.subset,
            "regressions": self.regressions,
            "rows": [{**vars(r), "significant": r.significant} for r in self.rows],
            "warnings": self.warnings,
        }


def compare_reports(
    a: str | Path, b: str | Path, metric: str = "judge", tolerance: float = 0.0
) -> list[Comparison]:
    """Per-dataset deltas B - A (percentage points) for each bank mode both evals ran (or the modes
    named with ``DIR:MODE``). A dataset where B is below A by more than ``tolerance`` is a regression;
    with seeds on both sides, a delta within the combined std is marked as within seed noise. When both
    evals' records are there, each row also gets a paired bootstrap 95% interval over shared questions
    and its mde. Each pair of modes gives one comparison over all questions, then (when both evals hold
    answerability) one over the questions answerable in both."""
    if metric not in METRICS:
        raise CompareError(f"unknown metric {metric!r}; choose {', '.join(METRICS)}")
    ra, ma, la, da = load_report(a)
    rb, mb, lb, db = load_report(b)
    try:
        return _compare_reports((ra, ma, la, da), (rb, mb, lb, db), metric, tolerance)
    except (KeyError, TypeError, AttributeError) as exc:  # a report.json of another shape (hand-edited)
        raise CompareError(
            f"{da / 'report.json'} or {db / 'report.json'}: not a report `sesa eval` writes "
            f"({type(exc).__name__}: {exc}); rerun `sesa eval` to write it again"
        ) from None


def _compare_reports(a: tuple, b: tuple, metric: str, tolerance: float) -> list[Comparison]:
    ra, ma, la, da = a
    rb, mb, lb, db = b
    recs_a, recs_b = read_records(da), read_records(db)
    if ma or mb:
        pairs = [(ma or mb, mb or ma)]
        for r, m, lab in ((ra, pairs[0][0], la), (rb, pairs[0][1], lb)):
            if m not in r["modes"]:
                raise CompareError(f"{lab}: mode {m!r} is not in that eval (it has {', '.join(r['modes'])})")
    else:
        pairs = [(m, m) for m in ra["modes"] if m in rb["modes"]]
        if not pairs:
            raise CompareError(
                f"{la} ran modes {ra['modes']}, {lb} ran {rb['modes']}: none in common; "
                "name them, e.g. A:off B:on"
            )
    datasets = order_datasets([*ra["datasets"], *rb["datasets"]]) + ["mean"]
    reach_a, reach_b = read_answerability(da), read_answerability(db)
    keep = answerable_keys(reach_a) & answerable_keys(reach_b)
    subsets = [s for s in SUBSETS if s == "all" or (reach_a and reach_b and s in ra and s in rb)]
    out = []
    for mode_a, mode_b in pairs:
        for subset in subsets:
            out.append(
                _compare_modes(
                    (ra, la, recs_a, mode_a, ma),
                    (rb, lb, recs_b, mode_b, mb),
                    metric,
                    tolerance,
                    datasets,
                    subset,
                    keep if subset == "answerable" else None,
                )
            )
    return out


def _compare_modes(
    side_a: tuple, side_b: tuple, metric: str, tolerance: float, datasets: list[str], subset: str, keep: Any
) -> Comparison:
    """One comparison: each side is (report, label, records, mode, mode named by the user or None)."""
    ra, la, recs_a, mode_a, ma = side_a
    rb, lb, recs_b, mode_b, mb = side_b
    pa, pb = (ra, rb) if subset == "all" else (ra[subset], rb[subset])
    ca, cb = pa["metrics"][metric][mode_a], pb["metrics"][metric][mode_b]
    label_a = f"{la}:{mode_a}" if ma is None else la
    label_b = f"{lb}:{mode_b}" if mb is None else lb
    cmp_ = Comparison(metric, label_a, label_b, warnings=_setting_differences(ra, rb, metric), subset=subset)
    in_a, in_b = pa.get("datasets", ra["datasets"]), pb.get("datasets", rb["datasets"])
    shared_ds = [d for d in datasets if d != "mean" and d in in_a and d in in_b]
    paired = (
        paired_intervals(recs_a, recs_b, mode_a, mode_b, METRICS[metric], shared_ds, keep=keep)
        if recs_a is not None and recs_b is not None
        else {}
    )
    for ds in datasets:
        x, y = ca.get(ds), cb.get(ds)
        have = x and y and x.get("mean") is not None and y.get("mean") is not None
        delta = y["mean"] - x["mean"] if have else None
        regression = delta is not None and delta < -tolerance
        noise = (
            have
            and x.get("std") is not None
            and y.get("std") is not None
            and abs(delta) <= math.hypot(x["std"], y["std"])
        )
        note = []
        if not have:
            note.append("only in one eval" if (x or y) else "missing")
        elif x.get("n") != y.get("n"):
            note.append(f"n differs ({x['n']} vs {y['n']})")
        if ds == "mean" and ra["datasets"] != rb["datasets"]:
            note.append("different datasets")
        p = paired.get(ds)
        if p is not None and have and x.get("n") is not None and p["n"] < min(x["n"], y.get("n") or 0):
            note.append(f"interval over the {p['n']} questions both ran")
        cmp_.rows.append(
            CompareRow(
                ds,
                x,
                y,
                delta,
                regression,
                bool(noise),
                "; ".join(note),
                ci=(p["lo"], p["hi"]) if p else None,
                n_paired=p["n"] if p else None,
                mde=p.get("mde") if p else None,
                p=p.get("p") if p else None,
            )
        )
    return cmp_


def _setting_differences(ra: Mapping[str, Any], rb: Mapping[str, Any], metric: str) -> list[str]:
    keys = ["decoding", "max_turns", "limit"] + (["judge"] if metric == "judge" else [])
    return [f"{k} differs: A {ra.get(k)!r}, B {rb.get(k)!r}" for k in keys if ra.get(k) != rb.get(k)]


def fmt_ci(r: CompareRow) -> str:
    """``[-2.3, +1.0] p 0.75``: the paired interval and, for 0/1 scores, the exact McNemar p."""
    if r.ci is None:
        return "–"
    return f"[{r.ci[0]:+.1f}, {r.ci[1]:+.1f}]" + (f" p {fmt_p(r.p)}" if r.p is not None else "")


def fmt_mde(r: CompareRow) -> str:
    """``5.1 (300)``: the smallest detectable difference and the pairs behind it."""
    if r.mde is None:  # with pairs: no difference up to 100 points is detectable at this n
        return "–" if r.n_paired is None else f"none ({r.n_paired})"
    return f"{r.mde:.1f} ({r.n_paired})"


def flag_text(r: CompareRow) -> str:
    """``▼ regression`` with its qualifiers, then the row's note ('' for neither)."""
    flag = ""
    if r.regression:
        quals = [
            q
            for q, on in (("not significant", r.significant is False), ("within seed noise", r.within_noise))
            if on
        ]
        flag = "▼ regression" + (f" ({', '.join(quals)})" if quals else "")
    return "; ".join(x for x in (flag, r.note) if x)


def render_comparison(c: Comparison) -> str:
    """Markdown table of one comparison; regressions are flagged with ▼."""
    lines = [
        f"### {METRIC_TITLES[c.metric]}: B = `{c.b_label}` vs A = `{c.a_label}`"
        + (", answerable questions" if c.subset == "answerable" else ""),
        "",
        "| dataset | A | B | B - A | 95% CI (paired) | mde (n) | |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in c.rows:
        name = "Mean" if r.dataset == "mean" else display_name(r.dataset)
        lines.append(
            f"| {name} | {fmt_cell(r.a)} | {fmt_cell(r.b)} | {fmt_delta(r.delta)} | {fmt_ci(r)} | {fmt_mde(r)} | "
            f"{flag_text(r)} |"
        )
    regs = [display_name(d) for d in c.regressions if d != "mean"]
    lines += ["", f"B is below A on: {', '.join(regs)}" if regs else "B is not below A on any dataset."]
    lines += [f"Note: {w}" for w in c.warnings] + [""]
    return "\n".join(lines)
