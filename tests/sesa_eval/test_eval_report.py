"""Report aggregation: means, std over seeds, n per cell, errors left out."""

import math

import pytest

from sesa_eval.harness import EvalSettings
from sesa_eval.report import (
    aggregate,
    build_report,
    fmt_cell,
)
from sesa_eval.report_markdown import render_markdown


def rec(ds, qid, mode="off", seed=None, score=0.0, em=None, f1=None, status="answered"):
    return {
        "key": f"{ds}/{qid}/{mode}/{seed}",
        "dataset": ds,
        "id": qid,
        "mode": mode,
        "seed": seed,
        "score": score,
        "em": score if em is None else em,
        "f1": score if f1 is None else f1,
        "status": status,
        "judge_method": "exact",
        "turns": 2,
        "searches": 1,
        "skill_ids": [],
    }


def test_greedy_cells_and_unweighted_mean():
    records = [rec("nq", i, score=float(i < 3)) for i in range(4)]  # 3 of 4 right: 75
    records += [rec("bamboogle", i, score=float(i < 1)) for i in range(2)]  # 1 of 2: 50
    agg = aggregate(records, ["nq", "bamboogle"], ["off"], "score")["off"]
    assert agg["nq"] == {"mean": 75.0, "std": None, "n": 4, "n_max": 4, "seeds": 1, "errors": 0}
    assert agg["bamboogle"]["mean"] == 50.0
    # unweighted over datasets (62.5), not pooled over questions (4/6 = 66.7)
    assert agg["mean"]["mean"] == 62.5 and agg["mean"]["n"] == 6


def test_seeds_mean_and_sample_std():
    # seed 0: 2/2, seed 1: 1/2, seed 2: 0/2 -> per-seed 100, 50, 0 -> mean 50, sample std 50
    records = [rec("nq", q, seed=s, score=float(q < 2 - s)) for s in range(3) for q in range(2)]
    cell = aggregate(records, ["nq"], ["off"], "score")["off"]["nq"]
    assert cell["mean"] == pytest.approx(50.0)
    assert cell["std"] == pytest.approx(50.0)
    assert (cell["n"], cell["seeds"]) == (2, 3)
    assert fmt_cell(cell) == "50.0 ± 50.0 (2×3)"


def test_mean_column_is_per_seed_then_across_seeds():
    # dataset a: seeds 100, 0; dataset b: seeds 0, 100 -> per-seed means 50, 50 -> std 0
    records = [
        rec("a", 1, seed=0, score=1.0),
        rec("a", 1, seed=1, score=0.0),
        rec("b", 1, seed=0, score=0.0),
        rec("b", 1, seed=1, score=1.0),
    ]
    row = aggregate(records, ["a", "b"], ["off"], "score")["off"]
    assert row["a"]["std"] == pytest.approx(math.sqrt(5000))
    assert row["mean"]["mean"] == 50.0 and row["mean"]["std"] == 0.0


def test_errors_are_not_scores():
    records = [rec("nq", 1, score=1.0), rec("nq", 2, status="error"), rec("nq", 3, score=0.0)]
    cell = aggregate(records, ["nq"], ["off"], "score")["off"]["nq"]
    assert (cell["mean"], cell["n"], cell["errors"]) == (50.0, 2, 1)


def test_metrics_kept_apart_and_empty_cells():
    records = [rec("nq", 1, mode="on", score=1.0, em=0.0, f1=0.5)]  # an LLM-judged hit: score 1, EM 0
    s = EvalSettings(name="x", bank_modes=["off", "on"], bank="b")
    report = build_report(records, settings=s, datasets=["nq"], planned=2)
    m = report["metrics"]
    assert (m["judge"]["on"]["nq"]["mean"], m["em"]["on"]["nq"]["mean"], m["f1"]["on"]["nq"]["mean"]) == (
        100,
        0,
        50,
    )
    assert m["judge"]["off"]["nq"]["mean"] is None and fmt_cell(m["judge"]["off"]["nq"]) == "–"
    assert not report["complete"]
    md = render_markdown(report)
    assert "INCOMPLETE: 1 of 2" in md
    assert "| on | 100.0 (1) | 100.0 (1) |" in md  # judge table: dataset cell and mean, each with n
    assert "## Exact match" in md and "## Token F1" in md and "## Diagnostics" in md


def test_modes_are_compared_with_off_paired():
    records = []
    for i in range(50):  # on answers 10 more of 50 nq questions right, and the same bamboogle ones
        records += [rec("nq", i, score=float(i < 5)), rec("nq", i, mode="on", score=float(i < 15))]
        records += [
            rec("bamboogle", i, score=float(i < 5)),
            rec("bamboogle", i, mode="on", score=float(i < 5)),
        ]
    s = EvalSettings(name="x", bank_modes=["off", "on"], bank="b")
    report = build_report(records, settings=s, datasets=["nq", "bamboogle"], planned=200)
    nq, bam = report["vs_off"]["judge"]["on"]["nq"], report["vs_off"]["judge"]["on"]["bamboogle"]
    assert (nq["n"], nq["delta"]) == (50, 20.0) and 0 < nq["lo"] < 20 < nq["hi"]
    assert bam["delta"] == bam["lo"] == bam["hi"] == 0.0
    assert report["vs_off"]["judge"]["on"]["mean"]["delta"] == 10.0
    md = render_markdown(report)
    assert "## Against mode off" in md and "| on - off, judge score | +20.0 [+" in md
    only_on = build_report(
        records, settings=EvalSettings(name="x", bank_modes=["on"], bank="b"), datasets=["nq"], planned=50
    )
    assert only_on["vs_off"] == {} and "Against mode off" not in render_markdown(only_on)
