"""The memory plan of a multi-node run (cluster.trainers external): servers on the orchestrator node, each
trainer node's share of the ranks on train.trainer_gpus, FSDP2 across nodes, a refusal naming the node, and
the example 2 x 8 H100 config (configs/qwen3-8b-2x8h100.yaml). No model is loaded."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sesa_cli.main import build_app
from sesa_graph.config import load_config
from sesa_graph.reference_values import DEVIATIONS, REFERENCES, flatten
from tools.errors import UserError
from training.memory_plan import GIB, check_memory_plan, parallel_size, plan
from training.model_shapes import SHAPES

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "configs" / "qwen3-8b-2x8h100.yaml"
# the example with each job over two trainer nodes: 8 ranks a job, 4 on each node
TWO_TRAINER_NODES = {
    "cluster.trainer_nodes": 2,
    "cluster.main_address": "10.0.0.2",
    "train.trainer_ranks": {"solver": 8, "proposer": 8},
}


def test_the_example_puts_the_servers_on_the_orchestrator_and_the_trainers_on_node_1():
    mp = check_memory_plan(load_config(H100))
    assert mp.nodes == ["orchestrator", "trainer node 0"]
    where = {d.label: [p.name for p in d.processes] for d in mp.gpus}
    assert [where[f"orchestrator GPU {g}"] for g in range(4)] == [
        [f"solver vllm server replica {r}/4"] for r in (1, 2, 3, 4)
    ]
    assert [where[f"orchestrator GPU {g}"] for g in (4, 5)] == [
        [f"proposer vllm server replica {r}/2"] for r in (1, 2)
    ]
    assert [where[f"orchestrator GPU {g}"] for g in (6, 7)] == [["models.fixed vllm server"]] * 2
    assert [where[f"trainer node 0 GPU {g}"] for g in range(4)] == [
        [f"solver trainer rank {r}/4"] for r in range(4)
    ]
    assert [where[f"trainer node 0 GPU {g}"] for g in range(4, 8)] == [
        [f"proposer trainer rank {r}/4"] for r in range(4)
    ]
    assert len(mp.gpus) == 16 and all(d.capacity_gib == 79 and 0 < d.total < 79 for d in mp.gpus)
    rank = mp.gpus[8].processes[0]  # FSDP2 over 4 ranks: fp32 grads of 8.19B parameters / 4
    assert rank.parts["grads"] == pytest.approx(SHAPES["Qwen/Qwen3-8B"].params * 4 / 4 / GIB)
    replica, judge = mp.gpus[0].processes[0], mp.gpus[6].processes[0]  # a whole 8B; half the 32B (TP 2)
    assert replica.parts["weights"] == pytest.approx(SHAPES["Qwen/Qwen3-8B"].params * 2 / GIB)
    assert judge.parts["weights"] == pytest.approx(SHAPES["Qwen/Qwen2.5-32B-Instruct"].params * 2 / 2 / GIB)
    assert any(n.startswith("weights (store), bf16 copies of solver 15.3 + proposer 15.3") for n in mp.notes)
    assert not any("vLLM would not use them" in n for n in mp.notes)


def test_the_example_satisfies_the_reference_values_like_the_other_gpu_configs():
    values = flatten(load_config(H100).model_dump(mode="json"))
    differ = {k: (values[k], ref.value) for k, ref in REFERENCES.items() if values[k] != ref.value}
    assert set(differ) == set(DEVIATIONS), differ


def test_fsdp2_shards_over_the_ranks_of_every_trainer_node():
    mp = check_memory_plan(load_config(H100, TWO_TRAINER_NODES))
    assert mp.nodes == ["orchestrator", "trainer node 0", "trainer node 1"]
    names = {d.label: d.processes[0].name for d in mp.gpus if d.node.startswith("trainer")}
    assert names["trainer node 0 GPU 0"] == "solver trainer rank 0/8"
    assert names["trainer node 1 GPU 3"] == "solver trainer rank 7/8"
    assert names["trainer node 1 GPU 4"] == "proposer trainer rank 4/8"
    one, two = (plan(load_config(H100, s)).gpus[-1].processes[0] for s in ({}, TWO_TRAINER_NODES))
    assert one.parts["optimizer"] == pytest.approx(2 * two.parts["optimizer"])
    assert any("across the trainer nodes" in n for n in mp.notes)


def test_a_trainer_node_that_overflows_is_refused_naming_the_node():
    cfg = load_config(H100, {"train.sharding": "none"})  # DDP: each rank a full fp32 8B with Adam
    with pytest.raises(UserError) as exc:
        check_memory_plan(cfg)
    msg = str(exc.value)
    assert "trainer node 0 GPU 0 needs" in msg and "short by" in msg and "orchestrator GPU" not in msg


def test_a_server_over_the_orchestrators_gpu_is_refused_naming_it():
    cfg = load_config(H100, {"models.fixed.serve.gpu_memory_utilization": 0.4})  # 31.6 GiB: weights only
    with pytest.raises(
        UserError, match="orchestrator models.fixed vllm server on GPU 6, GPU 7: its KV cache"
    ):
        check_memory_plan(cfg)


def test_servers_on_gpus_their_parallel_sizes_do_not_use_are_noted():
    tp, dp = ("--tensor-parallel-size", "-tp"), ("--data-parallel-size", "-dp")
    assert parallel_size(["--tensor-parallel-size", "4"], *tp) == 4 and parallel_size(["-tp", "2"], *tp) == 2
    assert parallel_size(["--data-parallel-size=8"], *dp) == 8 and parallel_size([], *tp) == 1
    mp = plan(load_config(H100, {"models.fixed.serve.server_args": []}))
    assert any(
        n.startswith("models.fixed vllm server: models.fixed.cuda_visible_devices gives 2 GPUs")
        for n in mp.notes
    )
    fixed = mp.gpus[6].processes[
        0
    ]  # planned as what vLLM would do: the whole 32B on each GPU, which cannot fit
    assert fixed.parts["weights"] == pytest.approx(SHAPES["Qwen/Qwen2.5-32B-Instruct"].params * 2 / GIB)
    # one server, data parallel over the role's 4 GPUs: an engine with the whole model on each
    dp4 = {"solver_policy.replicas": 1, "solver_policy.server_args": ["--data-parallel-size", "4"]}
    mp = check_memory_plan(load_config(H100, dp4))
    assert [d.processes[0].name for d in mp.gpus[:4]] == ["solver vllm server"] * 4
    assert not any("vLLM would not use them" in n for n in mp.notes)


def test_local_trainers_keep_the_one_machine_plan():
    mp = plan(load_config(H100, {"cluster.trainers": "local", "cluster.coordinator_host": "127.0.0.1"}))
    assert mp.nodes == [""] and [d.label for d in mp.gpus] == [f"GPU {g}" for g in range(8)]
    assert [p.name for p in mp.gpus[0].processes] == [
        "solver vllm server replica 1/4",
        "solver trainer rank 0/4",
    ]


def test_sesa_plan_prints_a_table_per_node():
    res = CliRunner().invoke(build_app(), ["plan", "-c", str(H100)])
    assert res.exit_code == 0, res.output
    assert "orchestrator node (`sesa train`)" in res.stdout
    assert "trainer node 0 (`sesa trainers --node-rank 0`)" in res.stdout
    bad = CliRunner().invoke(build_app(), ["plan", "-c", str(H100), "--set", "train.sharding=none"])
    assert bad.exit_code == 2 and "cannot fit its GPUs: trainer node 0 GPU 0 needs" in bad.stderr
