"""`sesa report`: the PNGs and the one-page HTML summary of a run and of an eval."""

import re
import shutil

import pytest

from sesa_runs import load, plots, report


def _images(html_path):
    return re.findall(r'<img src="([^"]+)"', html_path.read_text())


@pytest.fixture(scope="module")
def run_report(dirs, tmp_path_factory):
    d = tmp_path_factory.mktemp("rep") / "tiny"
    shutil.copytree(dirs["run"], d)
    return report.write_report(d)


def test_run_report_files(run_report):
    assert run_report.name == "report.html" and run_report.is_file()
    pngs = {p.name for p in (run_report.parent / "plots").glob("*.png")}
    assert pngs == {f"{n}.png" for n in plots.RUN_FIGURES}  # the tiny run has data for every plot
    imgs = _images(run_report)
    assert sorted(imgs) == sorted(f"plots/{n}" for n in pngs)  # every PNG is on the page, every image exists
    for p in (run_report.parent / "plots").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_run_report_content(run_report):
    h = run_report.read_text()
    assert "Run tiny" in h and "in progress" in h
    assert "step 4 has trajectories but no metrics line yet" in h
    assert "wrong, gold retrieved" in h and "wrong, gold never retrieved" in h and "guided but failed" in h
    assert "most helpful" in h and "Bank versions" in h
    assert "solver/0/0-0/0" in h and "<details open>" in h  # an example trace, the first one open
    assert "&lt;Salome&gt;" in h and "<Salome>" not in h


def test_eval_report(dirs, tmp_path):
    d = tmp_path / "ev"
    shutil.copytree(dirs["eval"], d)
    out = report.write_report(d)
    assert {p.name for p in (d / "plots").glob("*.png")} == {"scores.png", "outcomes.png"}
    assert all((d / src).is_file() for src in _images(out))
    h = out.read_text()
    assert "Eval ev" in h and "on - off" in h and "+33.3" in h and "seed-bridge-entity" in h
    assert (d / "report.json").is_file() and (d / "report.md").is_file()  # the eval's own report is untouched


@pytest.mark.parametrize("key", ["empty_run", "empty_eval"])
def test_report_of_an_empty_dir(dirs, tmp_path, key):
    d = tmp_path / key
    shutil.copytree(dirs[key], d)
    out = report.write_report(d)
    assert out.is_file() and _images(out) == [] and not list((d / "plots").glob("*.png"))
    assert "nothing to plot yet" in out.read_text()


def test_figures_of_an_empty_run_are_none(dirs):
    run = load.open_run(dirs["empty_run"])
    assert all(fn(run) is None for fn in plots.RUN_FIGURES.values())
    ev = load.open_eval(dirs["empty_eval"])
    assert all(fn(ev) is None for fn in plots.EVAL_FIGURES.values())


def test_report_rejects_a_non_run_dir(tmp_path):
    with pytest.raises(load.RunNotFoundError, match="config.yaml is missing"):
        report.write_report(tmp_path)


def test_skills_are_helpful_or_harmful_by_the_sign_of_their_score(run_report, dirs):
    h = run_report.read_text()
    sk = load.open_run(dirs["run"]).skills()
    used = sk[sk["retrieved"] > 0]
    harmful = h.split("most harmful", 1)[1].split("<h2>", 1)[0]
    helpful = h.split("most helpful", 1)[1].split("most harmful", 1)[0]
    for r in used.itertuples():
        if r.score >= 0:
            assert f"<code>{r.id}</code>" not in harmful, r
        if r.score <= 0:
            assert f"<code>{r.id}</code>" not in helpful, r
    assert (used["score"] > 0).any() and f"<code>{used.loc[used['score'].idxmax(), 'id']}</code>" in helpful


def test_count_axes_have_whole_ticks_and_no_negative_counts(dirs):
    import matplotlib

    matplotlib.use("Agg")
    run = load.open_run(dirs["run"])
    fig = plots.fig_skills(run)
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(not x.startswith(("-", "−")) and float(x) == int(float(x)) for x in labels), labels
    outcomes = plots.fig_outcomes(run)
    outcomes.canvas.draw()
    assert all(float(v) == int(v) for v in outcomes.axes[0].get_yticks())


def test_the_report_says_which_correct_rewards_a_model_judge_gave(dirs):
    """A tile beside "solver rollouts correct": exact match's and the model judge's shares of them, counted
    from the rollouts' own verdicts."""
    import pandas as pd

    from sesa_runs.report_run import judge_share

    solver = pd.DataFrame(
        {"correct": [True, True, True, False, None], "judge_method": ["exact", "llm", "exact", "llm", "none"]}
    )
    assert judge_share(solver) == "2 / 1"
    assert judge_share(solver.iloc[:0]) == "–"
    rollouts = load.open_run(dirs["run"]).rollouts("solver")
    correct = [c is not None and not pd.isna(c) and bool(c) for c in rollouts["correct"]]
    exact = sum(1 for c, m in zip(correct, rollouts["judge_method"], strict=True) if c and m == "exact")
    assert exact > 0 and judge_share(rollouts) == f"{exact} / 0"  # the tiny run's verdicts are exact match
