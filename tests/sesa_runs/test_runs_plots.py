"""The frontier figure tells the groups the trainer learned from apart from those run beyond its batch."""

import json

import yaml

from sesa_graph.config import load_config
from sesa_graph.trajectory import Trajectory
from sesa_runs.load import open_run
from sesa_runs.plots import fig_frontier, solver_groups
from training.store import TrajectoryStore


def _group(gid, correct, selected):
    return [
        Trajectory(
            role="solver",
            run="r",
            step=0,
            question_id=gid,
            group_id=gid,
            sample=i,
            prompt_ids=[1],
            completion_ids=[2],
            env_mask=[1],
            logprobs=[-0.1],
            status="answered",
            final="x",
            correct=c,
            reward=float(c),
            selected=selected,
        )
        for i, c in enumerate(correct)
    ]


def test_groups_run_beyond_the_batch_are_marked(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(load_config().model_dump(mode="json")))
    TrajectoryStore(tmp_path).write(
        0,
        "solver",
        _group("kept", [1, 0], True) + _group("spare", [0, 1], False) + _group("flat", [0, 0], False),
    )
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "items": 1, "valid_proposals": 1}) + "\n")
    run = open_run(tmp_path)
    g = solver_groups(run).set_index("group_id")
    assert g["selected"].to_dict() == {"flat": False, "kept": True, "spare": False}
    assert list(g["p"]) == [0.0, 0.5, 0.5]
    fig = fig_frontier(run)
    [marker] = [ln for ln in fig.axes[0].get_lines() if "batch" in ln.get_label()]
    assert list(marker.get_ydata()) == [1]  # one of the two frontier groups was trained on
    assert "67%" in fig.axes[0].get_title()


def test_consolidations_that_admitted_nothing_are_shown_as_committed(tmp_path):
    """Two committed consolidations, both +0 (the default run's usual case): the chart said "no consolidation
    committed yet" beside a table listing them, with an empty axis of -0.04 to 0.04."""
    from sesa_runs.plots import fig_bank

    (tmp_path / "config.yaml").write_text(yaml.safe_dump(load_config().model_dump(mode="json")))
    lines = [
        {"step": s, "items": 1, "valid_proposals": 1, "bank_size": 15, "bank_version": s // 2}
        for s in range(4)
    ]
    for s, v in ((1, 1), (3, 2)):
        lines[s]["consolidation"] = {"version": v, "admitted": 0, "evicted": 0, "rejected": {"too_long": 2}}
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    fig = fig_bank(open_run(tmp_path))
    ax, bars = fig.axes
    assert ax.get_legend().get_title().get_text() == "2 consolidation(s) committed"
    assert sorted({round(p.get_x() + p.get_width() / 2) for p in bars.patches}) == [1, 3]
    assert bars.get_ylim()[0] == 0 and bars.get_ylim()[1] > 0
