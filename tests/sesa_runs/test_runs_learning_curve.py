"""The learning curve: the probe numbers of a run's step records, as read and as plotted."""

import json

import yaml

from sesa_graph.config import load_config
from sesa_runs.load import open_run
from sesa_runs.plots import RUN_FIGURES, fig_learning_curve
from sesa_runs.probe import probe_curve
from sesa_runs.report import write_report


def _probe(version, off, on, n=40):
    return {
        "dataset": "probe",
        "questions": n,
        "policy_version": version,
        "bank_version": 1,
        "seconds": 50.0,
        "off": {"em": off, "score": off, "n": n, "errors": 0},
        "on": {"em": on, "score": on, "n": n, "errors": 0},
    }


def _run(tmp_path):
    run = tmp_path / "lc"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(load_config().model_dump(mode="json")))
    lines = []
    for s in range(4):
        step = {
            "step": s,
            "items": 2,
            "valid_proposals": 1,
            "valid_rate": 0.5,
            "invalid_reasons": {"spoiler": 1},
            "solver_success_rates": [0.4],
            "solver_status": {"answered": 5},
            "bank_size": 12,
            "seconds": 3.0,
        }
        lines.append(step)
        if s in (0, 2, 3):  # the probe's record of the step, appended after its commit
            lines.append({**step, "probe": _probe(s, 5.0 + s, 7.5 + s)})
    lines.insert(1, {**lines[0], "step": 1, "items": 9})  # an attempt at step 1 that a resume superseded
    lines.insert(2, {"resume": {"from_step": 1, "attempt": 2}})
    lines.append({**lines[0], "step": 5, "probe": {"error": "EvalError: down", "policy_version": 5}})
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run


def test_probe_curve_reads_one_probe_per_step_and_mode(tmp_path):
    c = probe_curve(open_run(_run(tmp_path)))
    assert list(zip(c["step"], c["mode"], c["em"])) == [
        (0, "off", 5.0),
        (0, "on", 7.5),
        (2, "off", 7.0),
        (2, "on", 9.5),
        (3, "off", 8.0),
        (3, "on", 10.5),
    ]
    assert set(c["n"]) == {40} and list(c["policy_version"]) == [0, 0, 2, 2, 3, 3]
    assert len(open_run(_run(tmp_path / "b")).metrics()) == 5  # still one row per step


def test_learning_curve_plots_every_probed_point_with_its_n(tmp_path):
    assert "learning_curve" in RUN_FIGURES
    fig = fig_learning_curve(open_run(_run(tmp_path)))
    (ax,) = fig.axes
    lines = {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()}
    assert lines == {"bank off": ([0, 2, 3], [5.0, 7.0, 8.0]), "bank on": ([0, 2, 3], [7.5, 9.5, 10.5])}
    assert [t.get_text() for t in ax.texts] == ["n=40"] * 6


def test_a_run_without_probes_has_no_curve_and_the_report_shows_one_that_has(tmp_path):
    run = _run(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.yaml").write_text((run / "config.yaml").read_text())
    (plain / "metrics.jsonl").write_text(json.dumps({"step": 0, "items": 2}) + "\n")
    assert fig_learning_curve(open_run(plain)) is None
    html = write_report(run).read_text()
    assert 'src="plots/learning_curve.png"' in html and "probe-set EM" in html
    assert (run / "plots" / "learning_curve.png").stat().st_size > 0
