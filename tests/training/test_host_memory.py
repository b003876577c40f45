"""`sesa train`'s CPU memory check: the default run's processes are all counted, and a machine with too little
free memory is refused before anything starts, in one line naming the knobs."""

from __future__ import annotations

import pytest

from sesa_graph.config import load_config
from tools.errors import UserError
from training.host_memory import MARGIN_GIB, available_gib, check_host_memory, host_plan, on_this_cpu


def test_the_default_run_counts_every_process_it_starts():
    cfg = load_config(None)
    names = [p.name for p in host_plan(cfg)]
    assert names[0].startswith("orchestrator")
    assert {"solver vLLM server", "proposer vLLM server", "solver trainer", "proposer trainer"} <= set(names)
    assert on_this_cpu(cfg)
    total = sum(p.gib for p in host_plan(cfg))
    assert 8 < total < 24  # the measured default sits in between; a unit slip (MiB, bytes) does not


def test_without_fixed_models_the_plan_is_smaller_and_names_no_llama_server():
    full = load_config(None)
    bare = load_config(None, {"judge.kind": "none", "memory.mode": "off"})
    assert not any("models." in p.name for p in host_plan(bare))
    assert sum(p.gib for p in host_plan(bare)) < sum(p.gib for p in host_plan(full))


def test_a_machine_without_room_is_refused_naming_the_knobs():
    cfg = load_config(None)
    need = sum(p.gib for p in host_plan(cfg)) + MARGIN_GIB
    assert check_host_memory(cfg, (need + 0.1, "test")) == pytest.approx(need)
    with pytest.raises(UserError) as err:
        check_host_memory(cfg, (need - 1.0, "MemAvailable"))
    msg = str(err.value)
    assert "\n" not in msg and "MemAvailable" in msg and "train.memory_check=false" in msg
    assert "judge.kind=none" in msg


def test_this_machines_free_memory_is_read():
    have, source = available_gib()
    assert have > 0 and source


def test_sesa_train_refuses_before_it_makes_the_run_directory(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import training.host_memory as hm
    from sesa_cli.main import build_app

    monkeypatch.setattr(hm, "available_gib", lambda: (2.0, "MemAvailable"))
    res = CliRunner().invoke(build_app(), ["train", "--runs-dir", str(tmp_path / "runs"), "--name", "x"])
    assert res.exit_code == 2, res.output
    assert "machine has 2.0 GiB free" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "runs" / "x").exists()


def test_a_cgroup_limit_below_memavailable_is_what_counts(tmp_path):
    """A run started inside a cgroup (a 16 GiB container on a bigger machine) is checked against the room left
    under its limit, v1 or v2, found through /proc/self/cgroup."""
    from pathlib import Path

    from training.host_memory import _cgroup_room

    made = False
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controllers == "":
            d = tmp_path / rel
            d.mkdir(parents=True, exist_ok=True)
            (d / "memory.max").write_text(str(16 * 2**30) + "\n")
            (d / "memory.current").write_text(str(3 * 2**30) + "\n")
            (d / "memory.stat").write_text(f"anon 1\ninactive_file {2**30}\nactive_file {2**30}\n")
            made = True
        elif "memory" in controllers.split(","):
            d = tmp_path / "memory" / rel
            d.mkdir(parents=True, exist_ok=True)
            (d / "memory.limit_in_bytes").write_text(str(16 * 2**30) + "\n")
            (d / "memory.usage_in_bytes").write_text(str(9 * 2**30) + "\n")
            # 8 GiB of it page cache (a set-up's downloads), which the kernel reclaims before it kills
            (d / "memory.stat").write_text(
                f"cache 8000\ntotal_inactive_file {6 * 2**30}\ntotal_active_file {2 * 2**30}\n"
            )
            made = True
    if not made:
        pytest.skip("this process is in no cgroup hierarchy")
    room, source = _cgroup_room(tmp_path)
    assert room == 15 * 2**30 and "cgroup" in source
    assert _cgroup_room(tmp_path / "nowhere") is None


def test_a_reference_model_is_counted_only_when_beta_needs_one():
    plain = {p.name: p.gib for p in host_plan(load_config(None))}
    with_ref = {p.name: p.gib for p in host_plan(load_config(None, {"train.beta": 0.001}))}
    assert with_ref["solver trainer"] > plain["solver trainer"]
    assert with_ref["solver vLLM server"] == plain["solver vLLM server"]


def test_taking_turns_counts_one_update_and_only_for_single_rank_trainers():
    turns = host_plan(load_config(None))
    both = host_plan(load_config(None, {"train.one_update_at_a_time": False}))
    assert [p.name for p in turns if "update" in p.name] == ["one trainer update at a time"]
    assert [p.name for p in both if "update" in p.name] == [
        "solver trainer's update",
        "proposer trainer's update",
    ]
    assert sum(p.gib for p in turns) < sum(p.gib for p in both)
    ranks = host_plan(
        load_config(None, {"train.trainer_ranks": {"solver": 2}, "train.trainer_launcher": ["torchrun"]})
    )
    assert sum("update" in p.name for p in ranks) == 3  # ranks of a job update together: no turns


def test_an_update_is_estimated_from_its_tokens_and_checkpointing():
    """The activations of a pass grow with micro_batch_size x max_completion_length (a 192-token test run was
    refused on a machine with 18 GiB free while every update was counted at the default's 1024 tokens)."""

    def update(**ov):
        plan = host_plan(
            load_config(None, {"train.one_update_at_a_time": False, "train.park_optimizer": False, **ov})
        )
        return next(p.gib for p in plan if p.name == "solver trainer's update")

    assert update(**{"train.max_completion_length": 192}) < update() - 1
    assert update(**{"train.micro_batch_size": 2}) > update() + 1
    assert update(**{"train.gradient_checkpointing": False}) > update()


def test_parked_optimizer_state_moves_from_rest_to_the_update():
    """train.park_optimizer: AdamW's 8 bytes a parameter leave each waiting trainer and come back in the update."""
    from training.host_memory import GIB, PARKED_BYTES_PER_PARAM, _params

    parked = {p.name: p.gib for p in host_plan(load_config(None, {"train.one_update_at_a_time": False}))}
    kept = {
        p.name: p.gib
        for p in host_plan(
            load_config(None, {"train.one_update_at_a_time": False, "train.park_optimizer": False})
        )
    }
    params = _params(load_config(None).solver_policy.model)
    moments = params * PARKED_BYTES_PER_PARAM / GIB
    assert kept["solver trainer"] - parked["solver trainer"] == pytest.approx(moments)
    # they come back at the optimizer step, when the passes' activations are gone: the larger of the two phases
    activations = kept["solver trainer's update"] - params * 8 / GIB
    assert parked["solver trainer's update"] == pytest.approx(
        max(params * 4 / GIB + activations, 2 * moments)
    )
