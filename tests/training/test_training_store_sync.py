"""Trajectory store, the orchestrator's on-disk record of the barrier (commit markers, STOP.json, published
weights; the live barrier is tests/training/test_coordinator.py), and the trainer's batch assembly."""

import pandas as pd
import pytest

from sesa_graph.trajectory import Trajectory
from training.batch_groups import select_groups as _select_groups
from training.store import TrajectoryStore
from training.sync import SyncDir
from training.trainer import batch_shape, micro_batches, passthrough_reward
from training.trainer_rows import rows_for_training


def traj(group="g", sample=0, reward=0.0, status="answered", reused=False, role="solver", n=3):
    return Trajectory(
        role=role,
        question_id="q",
        group_id=group,
        sample=sample,
        prompt_ids=[1, 2],
        completion_ids=list(range(n)),
        env_mask=[1, 0, 1][:n] + [1] * max(0, n - 3),
        logprobs=[-0.1] * n,
        status=status,
        reward=reward,
        reused=reused,
        trainable=status != "search_error",
    )


def test_store_round_trip_and_atomicity(tmp_path):
    store = TrajectoryStore(tmp_path)
    store.write(0, "solver", [traj(sample=i, reward=i) for i in range(3)])
    store.write(0, "proposer", [])
    df = store.read(0, "solver")
    assert list(df["reward"]) == [0, 1, 2] and list(df["env_mask"][0]) == [1, 0, 1]
    assert store.steps() == [0] and len(store.read(0, "proposer")) == 0
    assert not list((tmp_path / "trajectories" / "step-00000").glob("*.tmp"))
    assert len(store.read_all("solver")) == 3
    assert isinstance(pd.read_parquet(store.path(0, "solver")), pd.DataFrame)  # readable without our code
    with pytest.raises(FileNotFoundError, match="step 7"):
        store.read(7, "solver")
    with pytest.raises(ValueError, match="role"):
        store.path(0, "judge")


def test_rows_for_training_masks_untrainable_and_checks_size(tmp_path):
    store = TrajectoryStore(tmp_path)
    rows = [traj(sample=0, reward=1.0), traj(sample=1, status="search_error")]
    extra = traj(group="h")
    extra.selected = False
    store.write(1, "solver", rows + [extra])
    out = rows_for_training(store.read(1, "solver"), 2, "solver", 1)
    assert out["reward"] == [1.0, 0.0]
    assert out["env_mask"][0] == [1, 0, 1] and out["env_mask"][1] == [0, 0, 0]  # search_error: no loss
    with pytest.raises(RuntimeError, match="batch is 5"):
        rows_for_training(store.read(1, "solver"), 5, "solver", 1)
    cut = rows_for_training(store.read(1, "solver"), 2, "solver", 1, max_completion_length=2)
    assert [len(c) for c in cut["completion_ids"]] == [2, 2] and cut["env_mask"][0] == [1, 0]
    assert [len(lp) for lp in cut["logprobs"]] == [2, 2]


def test_select_groups_prefers_fresh_complete_groups():
    fresh = [traj("f", i) for i in range(2)]
    reused = [traj("r", i, reused=True) for i in range(2)]
    partial = [traj("p", 0)]
    out = _select_groups(reused + partial + fresh, questions=1, group_size=2)
    assert [t.group_id for t in out if t.selected] == ["f", "f"]
    assert len(out) == 5  # nothing is dropped, only unselected


def test_select_groups_can_prefer_groups_with_reward_variance():
    flat = [traj("flat", i, reward=0.0) for i in range(2)]  # fresh, but every rollout scored the same
    split = [traj("split", i, reward=float(i), reused=True) for i in range(2)]
    picked = lambda out: [t.group_id for t in out if t.selected]
    assert picked(_select_groups(split + flat, questions=1, group_size=2)) == ["flat", "flat"]
    assert picked(_select_groups(split + flat, questions=1, group_size=2, prefer_variance=True)) == [
        "split",
        "split",
    ]
    assert picked(_select_groups(flat + split[:1], questions=1, group_size=2, prefer_variance=True)) == [
        "flat",
        "flat",
    ]


def test_batch_shapes():
    from sesa_graph.config import load_config

    cfg = load_config()
    assert batch_shape(cfg, "solver") == (
        cfg.train.questions_per_step * cfg.solver.group_size,
        cfg.solver.group_size,
    )
    assert batch_shape(cfg, "proposer") == (cfg.train.targets_per_step, cfg.train.targets_per_step)
    assert passthrough_reward(["p"] * 2, ["a", "b"], reward=[0.5, -1]) == [0.5, -1.0]


def test_the_record_of_commits_and_the_stop_reason(tmp_path):
    sync = SyncDir(tmp_path)
    assert sync.committed_steps() == [] and not sync.is_committed(0) and sync.stopped() is None
    sync.commit(0, {"step": 0, "items": 2})
    sync.commit(10, {"step": 10})
    # numeric order, not the file names' (committed-10 sorts before committed-2 as text)
    sync.commit(2, {"step": 2})
    assert sync.committed_steps() == [0, 2, 10] and sync.is_committed(2) and not sync.is_committed(1)
    assert sync.committed(0) == {"step": 0, "items": 2}  # what a replay hands a resumed trainer
    sync.stop("KeyboardInterrupt: user interrupt")
    assert SyncDir(tmp_path).stopped() == "KeyboardInterrupt: user interrupt"  # read by a later process


def test_publish_weights_swaps_atomically(tmp_path):
    sync = SyncDir(tmp_path)
    sync.publish_weights("solver", 1, lambda d: (d / "model.safetensors").write_text("v1"))
    sync.publish_weights("solver", 2, lambda d: (d / "model.safetensors").write_text("v2"))
    assert sync.weights_version("solver") == 2
    assert (sync.weights_dir("solver") / "model.safetensors").read_text() == "v2"
    assert sorted(p.name for p in sync.weights_dir("solver").parent.iterdir()) == ["solver"]
    sync.commit(0, {"step": 0})
    sync.commit(2, {"step": 2})
    assert sync.committed_steps() == [0, 2]


def test_clear_weights_keeps_the_barrier_files(tmp_path):
    sync = SyncDir(tmp_path)
    sync.publish_weights("solver", 1, lambda d: (d / "model.safetensors").write_text("v1"))
    sync.commit(1, {"step": 1})
    sync.clear_weights()
    assert sync.weights_version("solver") is None and not (sync.root / "weights").exists()
    assert sync.committed_steps() == [1]


def test_micro_batches_divide_the_step_batch():
    assert micro_batches(10, 2) == (2, 5)
    assert micro_batches(10, 4) == (2, 5)  # 4 does not divide 10: the largest divisor below it
    assert micro_batches(4, 8) == (4, 1)
    assert micro_batches(7, 3) == (1, 7)


def test_resume_skips_a_checkpoint_killed_while_saving(tmp_path):
    from training.trainer_setup import latest_checkpoint

    assert latest_checkpoint(tmp_path) is None
    done = tmp_path / "checkpoint-1"
    done.mkdir()
    (done / "trainer_state.json").write_text('{"global_step": 1}')
    (done / "optimizer.pt").write_bytes(b"x")
    for name, state in (("checkpoint-2", None), ("checkpoint-3", '{"global_st')):  # weights only; torn state
        d = tmp_path / name
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"x")
        if state:
            (d / "trainer_state.json").write_text(state)
    assert latest_checkpoint(tmp_path) == str(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-1"]


def test_a_checkpoint_without_its_optimizer_state_is_refused_by_name(tmp_path):
    """transformers resumes from it without a word, AdamW's moments at zero."""
    import pytest

    from tools.errors import UserError
    from training.trainer_setup import latest_checkpoint

    ckpt = tmp_path / "checkpoint-2"
    ckpt.mkdir()
    (ckpt / "trainer_state.json").write_text('{"global_step": 2}')
    with pytest.raises(UserError, match="checkpoint-2 has no optimizer state"):
        latest_checkpoint(tmp_path)


def test_a_whole_run_loads_as_one_dataset_and_older_shards_read_with_todays_types(tmp_path):
    """Every shard has one Arrow schema (its version in the metadata): columns that are null in a proposer
    shard (verdict, correct, success_rate) and typed in a solver shard no longer stop `datasets` or
    `pyarrow.dataset` ("Couldn't cast double to null")."""
    import datasets
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from sesa_graph.trajectory import SCHEMA_KEY, SCHEMA_VERSION

    store = TrajectoryStore(tmp_path)
    for step in (0, 1):
        store.write(step, "proposer", [traj(role="proposer", group=f"p{i}") for i in range(2)])
        solved = [
            traj(sample=i, reward=float(i % 2)).model_copy(
                update={
                    "correct": bool(i % 2),
                    "success_rate": 0.5,
                    "verdict_json": "{}",
                    "skill_ids": ["s1"],
                }
            )
            for i in range(4)
        ]
        store.write(step, "solver", solved)
    store.write(2, "solver", [])  # an empty shard has the schema too
    assert pq.read_schema(store.path(1, "solver")).metadata[SCHEMA_KEY] == SCHEMA_VERSION.encode()
    files = sorted(str(p) for p in (tmp_path / "trajectories").glob("*/*.parquet"))
    loaded = datasets.load_dataset("parquet", data_files=files, split="train")
    assert len(loaded) == 12 and loaded.features["success_rate"].dtype == "float64"
    from collections import Counter

    assert Counter(loaded["correct"]) == {None: 4, False: 4, True: 4}
    assert ds.dataset(files, format="parquet").to_table().num_rows == 12
    # a shard written before: each column typed by its own rows (all-null -> null), one column missing
    old = pd.DataFrame([traj(role="proposer").model_dump()]).drop(columns=["reused"])
    old["success_rate"] = None
    old_path = store.path(3, "proposer")
    old_path.parent.mkdir(parents=True)
    old.to_parquet(old_path, index=False)
    assert str(pq.read_schema(old_path).field("success_rate").type) == "null"
    df = store.read(3, "proposer")
    assert df["success_rate"].isna().all() and df["reused"].isna().all() and list(df["reward"]) == [0.0]
    assert len(store.read_all("proposer")) == 5
