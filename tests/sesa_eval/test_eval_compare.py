"""`compare`: per-dataset deltas, regression flags, seed noise, paired bootstrap intervals."""

import json

import pytest

from sesa_eval.compare import CompareError, compare_reports, render_comparison
from sesa_eval.paired import paired_intervals
from sesa_eval.report import fmt_delta


def _write_report(tmp_path, name, cells, modes=("off",), std=None, n=100):
    datasets = list(cells)
    metrics = {}
    for metric in ("judge", "em", "f1"):
        metrics[metric] = {}
        for mode in modes:
            row = {
                ds: {"mean": v, "std": std, "n": n, "seeds": 3 if std is not None else 1}
                for ds, v in cells.items()
            }
            row["mean"] = {
                "mean": sum(cells.values()) / len(cells),
                "std": std,
                "n": n * len(cells),
                "seeds": 1,
            }
            metrics[metric][mode] = row
    d = tmp_path / name
    d.mkdir()
    (d / "report.json").write_text(
        json.dumps({"datasets": datasets, "modes": list(modes), "metrics": metrics})
    )
    return d


def test_compare_flags_regressions(tmp_path):
    a = _write_report(tmp_path, "a", {"nq": 40.0, "hotpotqa": 30.0, "bamboogle": 20.0})
    b = _write_report(tmp_path, "b", {"nq": 42.0, "hotpotqa": 30.0, "bamboogle": 12.0})
    (c,) = compare_reports(a, b)
    deltas = {r.dataset: r.delta for r in c.rows}
    assert deltas == {"nq": 2.0, "hotpotqa": 0.0, "bamboogle": -8.0, "mean": pytest.approx(-2.0)}
    assert c.regressions == ["bamboogle", "mean"]  # equal is not a regression
    text = render_comparison(c)
    assert "| Bamboogle | 20.0 (100) | 12.0 (100) | -8.0 | – | – | ▼ regression |" in text
    assert "B is below A on: Bamboogle" in text


def test_compare_tolerance_and_seed_noise(tmp_path):
    a = _write_report(tmp_path, "a", {"nq": 40.0, "bamboogle": 20.0}, std=2.0)
    b = _write_report(tmp_path, "b", {"nq": 39.0, "bamboogle": 12.0}, std=2.0)
    (c,) = compare_reports(a, b)
    rows = {r.dataset: r for r in c.rows}
    assert rows["nq"].regression and rows["nq"].within_noise  # -1 within hypot(2, 2)
    assert rows["bamboogle"].regression and not rows["bamboogle"].within_noise
    (c,) = compare_reports(a, b, tolerance=1.5)
    assert c.regressions == ["bamboogle", "mean"]


def test_compare_modes_within_one_eval(tmp_path):
    a = _write_report(tmp_path, "run", {"nq": 40.0}, modes=("off", "on"))
    (c,) = compare_reports(f"{a}:off", f"{a}:on")
    assert c.a_label.endswith(":off") and c.rows[0].delta == 0.0
    with pytest.raises(CompareError, match="mode 'placebo' is not in that eval"):
        compare_reports(f"{a}:off", f"{a}:placebo")


def test_compare_notes_different_n_and_datasets(tmp_path):
    a = _write_report(tmp_path, "a", {"nq": 40.0}, n=100)
    b = _write_report(tmp_path, "b", {"nq": 40.0, "popqa": 10.0}, n=20)
    (c,) = compare_reports(a, b)
    rows = {r.dataset: r for r in c.rows}
    assert "n differs (100 vs 20)" in rows["nq"].note
    assert rows["popqa"].delta is None and "only in one eval" in rows["popqa"].note
    assert "different datasets" in rows["mean"].note


def test_compare_warns_about_different_settings(tmp_path):
    a = _write_report(tmp_path, "a", {"nq": 40.0})
    b = _write_report(tmp_path, "b", {"nq": 40.0})
    for d, judge in ((a, "none"), (b, "policy")):
        rep = json.loads((d / "report.json").read_text())
        rep.update(judge=judge, decoding="greedy", max_turns=10, limit=None)
        (d / "report.json").write_text(json.dumps(rep))
    (c,) = compare_reports(a, b)
    assert c.warnings == ["judge differs: A 'none', B 'policy'"]
    assert "Note: judge differs" in render_comparison(c)
    (c,) = compare_reports(a, b, metric="em")
    assert c.warnings == []  # EM does not depend on the judge


def test_compare_missing_report(tmp_path):
    with pytest.raises(CompareError, match="no report.json"):
        compare_reports(tmp_path / "nope", tmp_path / "nope2")


def _rec(ds, qid, mode, score, seed=None, status="answered"):
    return {
        "key": f"{ds}/{qid}/{mode}/{seed}",
        "dataset": ds,
        "id": qid,
        "mode": mode,
        "seed": seed,
        "score": score,
        "em": score,
        "f1": score,
        "status": status,
    }


def _write_records(d, rows):
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_paired_interval_tells_a_flip_from_a_regression(tmp_path):
    # one eval, modes off and on, 100 nq questions: 20 right off; on loses 2 of them and gains 1 (noise) on nq and
    # 15 of 20 on popqa (a real drop)
    rows = []
    for i in range(100):
        rows += [_rec("nq", i, "off", float(i < 20)), _rec("nq", i, "on", float(2 <= i < 21))]
        rows += [_rec("popqa", i, "off", float(i < 20)), _rec("popqa", i, "on", float(i < 5))]
    d = _write_report(tmp_path, "run", {"nq": 20.0, "popqa": 20.0}, modes=("off", "on"))
    rep = json.loads((d / "report.json").read_text())
    rep["metrics"]["judge"]["on"].update(
        nq={"mean": 19.0, "n": 100}, popqa={"mean": 5.0, "n": 100}, mean={"mean": 12.0, "n": 200}
    )
    (d / "report.json").write_text(json.dumps(rep))
    _write_records(d, rows)
    (c,) = compare_reports(f"{d}:off", f"{d}:on")
    r = {x.dataset: x for x in c.rows}
    assert r["nq"].regression and r["nq"].significant is False and r["nq"].ci[0] < 0 < r["nq"].ci[1]
    assert r["popqa"].regression and r["popqa"].significant and r["popqa"].ci[1] < 0
    assert r["nq"].n_paired == 100 and r["mean"].n_paired == 200 and r["mean"].significant
    text = render_comparison(c)
    assert (
        "▼ regression (not significant)" in text and "| PopQA | 20.0 (100) | 5.0 (100) | -15.0 | [-" in text
    )


def test_paired_intervals_average_seeds_and_skip_errors_and_torn_lines(tmp_path):
    rows = [_rec("nq", 1, "off", 1.0, seed=s) for s in (0, 1)] + [
        _rec("nq", 1, "on", x, seed=s) for s, x in ((0, 1.0), (1, 0.0))
    ]
    rows += [_rec("nq", 2, "off", 1.0), _rec("nq", 2, "on", 0.0, status="error")]  # not a score: unpaired
    out = paired_intervals(rows, rows, "off", "on", "score", ["nq"])
    assert out["nq"]["n"] == 1 and out["nq"]["delta"] == pytest.approx(-50.0)
    assert out["mean"]["delta"] == pytest.approx(-50.0)
    assert paired_intervals(rows, rows, "off", "on", "score", ["nq", "popqa"]).get("mean") is None
    d = _write_report(tmp_path, "run", {"nq": 100.0}, modes=("off", "on"))
    _write_records(d, rows)
    with open(d / "records.jsonl", "a") as f:
        f.write('{"key": "nq/3/on/None", "dat')  # an eval still writing
    (c,) = compare_reports(f"{d}:off", f"{d}:on")
    assert c.rows[0].n_paired == 1


def test_reports_without_records_have_no_interval(tmp_path):
    a = _write_report(tmp_path, "a", {"nq": 40.0})
    b = _write_report(tmp_path, "b", {"nq": 38.0})
    (c,) = compare_reports(a, b)
    assert c.rows[0].ci is None and c.rows[0].significant is None and "| -2.0 | – |" in render_comparison(c)


def test_a_delta_that_rounds_to_zero_keeps_its_sign():
    assert (fmt_delta(-0.03), fmt_delta(0.0), fmt_delta(-1.25), fmt_delta(None)) == (
        "-0.03",
        "+0.0",
        "-1.2",
        "–",
    )


def test_a_corrupt_records_line_is_an_error_naming_the_file_and_line(tmp_path):
    from sesa_eval.harness import EvalError

    d = _write_report(tmp_path, "run", {"nq": 100.0}, modes=("off", "on"))
    (d / "records.jsonl").write_text(json.dumps(_rec("nq", 1, "off", 1.0)) + "\nnot json\n")
    with pytest.raises(EvalError, match=r"records.jsonl:2: not a record"):
        compare_reports(f"{d}:off", f"{d}:on")
