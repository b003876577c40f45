"""benchmarks/experiment.py's table: arms' EM over seeds, the answerable subset, paired intervals."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import experiment


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


def test_table_pairs_arms_on_the_probe_and_the_answerable_subset(tmp_path):
    probe = [("probe", str(i)) for i in range(10)]
    nq = [("nq", str(i)) for i in range(10)]
    reach = {k: int(k[1]) < 5 for k in nq}  # nq/0..4 answerable
    base = _eval_dir(tmp_path, "base", "off", {**{k: 0.0 for k in probe}, **{k: 0.0 for k in nq}}, reach)
    ssp = _eval_dir(
        tmp_path, "ssp", "off", {**{k: float(i < 2) for i, k in enumerate(probe)}, **{k: 0.0 for k in nq}}
    )
    # two SESA seeds: per question the mean over seeds
    s0 = _eval_dir(tmp_path, "s0", "on", {**{k: 1.0 for k in probe}, **{k: 1.0 for k in nq}})
    s1 = _eval_dir(
        tmp_path, "s1", "on", {**{k: float(i < 5) for i, k in enumerate(probe)}, **{k: 1.0 for k in nq}}
    )
    t = experiment.table({"base": [base], "ssp": [ssp], "sesa": [s0, s1]}, ["probe", "nq"])
    assert t["em"]["sesa"]["probe"] == pytest.approx(75.0) and t["em"]["ssp"]["probe"] == pytest.approx(20.0)
    assert t["n"]["base"] == {"probe": 10, "nq": 5, "mean": 15}  # nq: only its answerable questions
    assert t["em"]["sesa"]["mean"] == pytest.approx((75.0 + 100.0) / 2)
    p = t["pairs"]["sesa - base"]["nq"]
    assert p["n"] == 5 and p["delta"] == pytest.approx(100.0) and p["lo"] > 0
    assert t["pairs"]["sesa - ssp"]["probe"]["delta"] == pytest.approx(55.0)
    text = experiment.render(t, ["probe", "nq"], "# x")
    assert "| nq (answerable) | 0.0 (n=5)" in text and "sesa - ssp" in text and "| mean |" in text
    assert "Controls" not in text  # SESA ran in mode on only


def test_controls_bracket_sesa_on_the_same_questions(tmp_path):
    probe = [("probe", str(i)) for i in range(4)]
    base = _eval_dir(tmp_path, "base", "off", dict.fromkeys(probe, 0.0))
    runs = {
        m: _eval_dir(tmp_path, m, m, {k: float(i < n) for i, k in enumerate(probe)})
        for m, n in (("closed", 0), ("off", 1), ("on", 2), ("oracle", 4))
    }
    t = experiment.table({"base": [base], "ssp": [runs["off"]], "sesa": list(runs.values())}, ["probe"])
    assert t["controls"] == {
        "closed": {"probe": (0.0, 4)},
        "off": {"probe": (25.0, 4)},
        "on": {"probe": (50.0, 4)},
        "oracle": {"probe": (100.0, 4)},
    }
    assert t["em"]["sesa"]["probe"] == 50.0  # the arm's own cell is still its mode on
    text = experiment.render(t, ["probe"], "# x")
    assert "| dataset | closed | off | on | oracle |" in text and "| probe | 0.0 (n=4) | 25.0 (n=4)" in text


def test_bad_budgets_are_refused(capsys):
    with pytest.raises(SystemExit) as e:
        experiment.main(["--steps", "0"])
    assert e.value.code == 2 and "--steps and --seeds must be at least 1" in capsys.readouterr().err


def test_probe_rows_split_by_hops_and_by_forms_the_warm_up_saw():
    slices = experiment.probe_slices()
    assert len(slices) == 330 and slices["probe-0001"] == ("probe 1-hop", "probe seen forms")
    ids = {s: [q for q, v in slices.items() if s in v][:3] for s in ("probe 1-hop", "probe 3-hop")}
    assert all(slices[q][1] == "probe unseen forms" for q in ids["probe 3-hop"])  # docs/PROBE.md


def test_probe_slices_get_their_own_rows_and_pairs(tmp_path):
    slices = experiment.probe_slices()
    one = [q for q, v in slices.items() if v[0] == "probe 1-hop"][:4]
    three = [q for q, v in slices.items() if v[0] == "probe 3-hop"][:4]
    qs = [("probe", q) for q in one + three]
    base = _eval_dir(tmp_path, "base", "off", dict.fromkeys(qs, 0.0))
    ssp = _eval_dir(tmp_path, "ssp", "off", dict.fromkeys(qs, 0.0))
    sesa = _eval_dir(tmp_path, "sesa", "on", {k: float(k[1] in one) for k in qs})
    t = experiment.table({"base": [base], "ssp": [ssp], "sesa": [sesa]}, ["probe"])
    assert t["em"]["sesa"]["probe 1-hop"] == 100.0 and t["em"]["sesa"]["probe 3-hop"] == 0.0
    assert t["n"]["sesa"]["probe 3-hop"] == 4 and t["em"]["sesa"]["mean"] == 50.0  # the mean is over datasets
    assert t["pairs"]["sesa - base"]["probe 1-hop"]["delta"] == 100.0
    assert "| probe 3-hop | 0.0 (n=4)" in experiment.render(t, ["probe"], "# x")


def test_learning_curves_of_both_arms_in_one_figure(tmp_path):
    from tests.sesa_runs.test_runs_learning_curve import _run

    runs = {"ssp": [_run(tmp_path / "a")], "sesa": [_run(tmp_path / "b")]}
    out = experiment.learning_curves(runs, tmp_path / "lc.png")
    assert out is not None and out.stat().st_size > 10_000
    (tmp_path / "c" / "lc").mkdir(parents=True)  # a run with no probe yet: no figure
    (tmp_path / "c" / "lc" / "config.yaml").write_text((runs["ssp"][0] / "config.yaml").read_text())
    assert experiment.learning_curves({"ssp": [tmp_path / "c" / "lc"]}, tmp_path / "none.png") is None
