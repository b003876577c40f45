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
