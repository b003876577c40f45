"""benchmarks/experiment.py: arms kept per seed, A/A, two-level intervals and McNemar, resuming, the doc section."""

import json
import sys
from pathlib import Path

import pytest

from sesa_eval.datasets import PROBE_FILES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import experiment
import experiment_render
import experiment_table


def _eval_dir(root: Path, name: str, mode: str, em: dict[tuple[str, str], float], reach=None) -> Path:
    d = root / name
    d.mkdir(parents=True)
    rows = [
        {
            "key": f"{ds}/{q}/{mode}/greedy",
            "dataset": ds,
            "id": q,
            "mode": mode,
            "seed": None,
            "status": "answered",
            "em": v,
        }
        for (ds, q), v in em.items()
    ]
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if reach is not None:
        (d / "answerability.jsonl").write_text(
            "".join(
                json.dumps({"key": f"{ds}/{q}", "answerable": ok}) + "\n" for (ds, q), ok in reach.items()
            )
        )
    return d


V2 = [json.loads(x) for x in PROBE_FILES["probe-v2"].read_text("utf-8").splitlines()]
HEAD = [str(r["id"]) for r in V2 if not r["layout"] and r["hops"] == 1][:10]
LAYOUT = [str(r["id"]) for r in V2 if r["layout"]][:4]


def _probe(ids, score):
    return {("probe-v2", q): float(score(i)) for i, q in enumerate(ids)}


def test_table_keeps_seeds_apart_and_pairs_every_arm(tmp_path):
    nq = [("nq", str(i)) for i in range(10)]
    reach = {k: int(k[1]) < 5 for k in nq}  # nq/0..4 answerable
    qs = HEAD + LAYOUT
    base = _eval_dir(tmp_path, "base", "off", {**_probe(qs, lambda i: 0), **dict.fromkeys(nq, 0.0)}, reach)
    arms = {
        "ssp": [_probe(qs, lambda i: i < 2), _probe(qs, lambda i: i < 4)],
        "nobank": [_probe(qs, lambda i: i < 3), _probe(qs, lambda i: i < 3)],
        "sesa": [_probe(qs, lambda i: i < 10), _probe(qs, lambda i: i < 5)],
    }
    mode = {"ssp": "off", "nobank": "off", "sesa": "on"}
    evals = {"base": [base]} | {
        arm: [
            _eval_dir(tmp_path, f"{arm}{s}", mode[arm], {**em, **dict.fromkeys(nq, 1.0)})
            for s, em in enumerate(ems)
        ]
        for arm, ems in arms.items()
    }
    t = experiment_table.table(evals, ["probe-v2", "nq"], "probe-v2")
    assert t["rows"][0] == "probe-v2" and "probe-v2 layout" in t["rows"] and t["rows"][-1] == "nq"
    # the headline leaves the layout-bound forms out; they get their own row
    assert t["em"]["probe-v2"]["sesa"] == {"seeds": [100.0, 50.0], "n": 10}
    assert t["em"]["probe-v2 layout"]["base"]["n"] == 4
    assert t["em"]["nq"]["base"]["n"] == 5  # only its answerable questions
    # A/A: seed 1 - seed 0 of each arm
    assert t["aa"]["probe-v2"]["sesa"]["delta"] == pytest.approx(-50.0)
    assert (
        t["aa"]["probe-v2"]["nobank"]["delta"] == 0.0
        and t["aa"]["probe-v2"]["nobank"]["tests"][0]["p"] == 1.0
    )
    # sesa - nobank: the bank alone; two-level over seeds and questions, McNemar per seed pairing
    p = t["pairs"]["probe-v2"]["sesa - nobank"]
    assert p["questions"]["delta"] == pytest.approx(75.0 - 30.0)
    assert p["questions"]["replicates_a"] == p["questions"]["replicates_b"] == 2
    assert [(x["b"], x["c"]) for x in p["tests"]] == [(7, 0), (2, 0)]
    assert p["clusters"]["clusters"] <= 10
    assert t["pairs"]["nq"]["sesa - base"]["clusters"] is None  # clusters are the probe's
    # the seed-level t: sd pooled over the trained arms' seeds (sesa 100/50, nobank 30/30, ssp 20/40), df 3;
    # the base adds no seed spread, so its comparisons weigh one arm's seeds, not two
    sd = ((25**2 * 2 + 10**2 * 2) / 3) ** 0.5
    st = p["seeds_t"]
    assert (st["df"], st["sd"]) == (3, pytest.approx(sd))
    assert (st["lo"], st["hi"]) == (pytest.approx(45.0 - 3.1824463 * sd), 100.0)  # clipped
    sb = t["pairs"]["probe-v2"]["sesa - base"]["seeds_t"]
    assert sb["lo"] == pytest.approx(75.0 - 3.1824463 * sd * 0.5**0.5)
    text = experiment_render.render(t, "# x")
    assert "| probe-v2 | sesa - nobank | the bank alone" in text and "7:0 p 0.016" in text
    assert f"[{45.0 - 3.1824463 * sd:+.1f}, +100.0] (sd {sd:.1f}, df 3)" in text
    assert "| nq (answerable) | 0.0 (n=5) |" in text and "### A/A" in text


def test_bad_budgets_and_arms_are_refused(capsys):
    with pytest.raises(SystemExit) as e:
        experiment.main(["--steps", "0"])
    assert e.value.code == 2 and "--steps and --seeds must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        experiment.main(["--arms", "sesa,grpo"])
    assert "--arms sesa,grpo: choose from ssp, nobank, sesa" in capsys.readouterr().err


def test_probe_rows_and_clusters():
    slices, clusters = experiment_table.probe_meta("probe-v2")
    assert slices[LAYOUT[0]] == ("probe-v2 layout",)
    assert slices[HEAD[0]] == ("probe-v2", "probe-v2 1-hop", "probe-v2 seen forms")
    assert len(set(clusters.values())) < len(clusters)
    v1, c1 = experiment_table.probe_meta(
        "probe"
    )  # v1 records no clusters: computed from articles and answers
    assert len(v1) == 330 and v1["probe-0001"][1:] == ("probe 1-hop", "probe seen forms")
    assert max(list(c1.values()).count(c) for c in set(c1.values())) > 20


def test_resume_calls_continue_a_run_with_the_same_budget_and_skip_finished_pieces(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(experiment, "sesa", lambda args, log: calls.append(args))
    a = experiment.parse(["--steps", "3", "--runs-dir", str(tmp_path / "runs"), "--evals-dir", str(tmp_path)])
    experiment.train("nobank", 1, a, tmp_path / "log")
    assert calls[-1][:6] == ["train", "--name", "exp-nobank-s1", "--steps", "3", "--set"]
    assert calls[-1][7:11] == ["--bank", "off", "--proposer-reward", "frontier"]
    run = tmp_path / "runs" / "exp-nobank-s1"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("x: 1\n")
    experiment.train("nobank", 1, a, tmp_path / "log")
    assert calls[-1][:5] == ["train", "--resume", str(run), "--steps", "3"]
    (run / "summary.json").write_text("{}")
    n = len(calls)
    experiment.train("nobank", 1, a, tmp_path / "log")
    (tmp_path / "exp-base-probe").mkdir()
    (tmp_path / "exp-base-probe" / "report.json").write_text(json.dumps({"aborted": None}))
    experiment.evaluate("exp-base", "embedded-warm", ["off"], None, a, tmp_path / "log")
    assert len(calls) == n  # finished: nothing runs again
    (tmp_path / "exp-base-probe" / "report.json").write_text(json.dumps({"aborted": "interrupted"}))
    experiment.evaluate("exp-base", "embedded-warm", ["off"], None, a, tmp_path / "log")
    assert calls[-1][:3] == ["eval", "--name", "exp-base-probe"] and "probe-v2" in calls[-1]


def test_timing_sums_worked_invocations_and_the_doc_section_is_replaced(tmp_path):
    tm = experiment.Timing(tmp_path / "t.json")
    assert tm.run("quick", lambda: 7) == 7 and "quick" in json.loads((tmp_path / "t.json").read_text())
    doc = tmp_path / "EXPERIMENT.md"
    doc.write_text("# v1 results\nkept\n")
    experiment.write_doc(doc, "table one\n")
    experiment.write_doc(doc, "table two\n")
    text = doc.read_text()
    assert text.startswith("# v1 results\nkept\n") and "table two" in text and "table one" not in text


def test_learning_curves_of_both_arms_in_one_figure(tmp_path):
    from tests.sesa_runs.test_runs_learning_curve import _run

    runs = {"ssp": [_run(tmp_path / "a")], "sesa": [_run(tmp_path / "b")]}
    out = experiment.learning_curves(runs, tmp_path / "lc.png")
    assert out is not None and out.stat().st_size > 10_000
    (tmp_path / "c" / "lc").mkdir(parents=True)  # a run with no probe yet: no figure
    (tmp_path / "c" / "lc" / "config.yaml").write_text((runs["ssp"][0] / "config.yaml").read_text())
    assert experiment.learning_curves({"ssp": [tmp_path / "c" / "lc"]}, tmp_path / "none.png") is None
