"""The memory plan (training.memory_plan, `sesa plan`): shapes and parameter counts, the GPU configs' plans,
the refusal of a layout that cannot fit, fsdp2 sharding and the reference model. No model is loaded."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sesa_cli.main import build_app
from sesa_graph.config import load_config
from tools.errors import UserError
from training.memory_plan import GIB, check_memory_plan, plan, trainer_rank
from training.model_shapes import SHAPES, model_shape, read_shape

ROOT = Path(__file__).resolve().parents[2]
A100, H200 = ROOT / "configs" / "qwen3-4b-8xa100.yaml", ROOT / "configs" / "qwen3-4b-h200.yaml"
# the H200 layout before the plan existed: two full Qwen3-4B trainers and 0.3 + 0.3 + 0.15 servers on one GPU
OLD_H200 = {
    "solver_policy.model": "Qwen/Qwen3-4B",
    "proposer_policy.model": "Qwen/Qwen3-4B",
    "solver_policy.gpu_memory_utilization": 0.3,
    "proposer_policy.gpu_memory_utilization": 0.3,
    "models.fixed.serve.gpu_memory_utilization": 0.15,
    "train.micro_batch_size": 2,
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [("Qwen/Qwen3-4B", 4.02e9), ("Qwen/Qwen3-8B", 8.19e9), ("Qwen/Qwen2.5-32B-Instruct", 32.8e9)],
)
def test_the_parameter_formula_gives_the_published_counts(name, expected):
    assert SHAPES[name].params == pytest.approx(expected, rel=0.01)


def test_a_local_config_json_is_read_and_head_dim_defaults_to_hidden_over_heads(tmp_path):
    fields = {"vocab_size": 152064, "hidden_size": 5120, "intermediate_size": 27648, "num_hidden_layers": 64}
    fields |= {"num_attention_heads": 40, "num_key_value_heads": 8, "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(fields))  # Qwen2.5's config.json has no head_dim
    assert read_shape(tmp_path / "config.json") == SHAPES["Qwen/Qwen2.5-32B-Instruct"]
    assert model_shape(str(tmp_path)) == SHAPES["Qwen/Qwen2.5-32B-Instruct"]
    with pytest.raises(UserError, match="no shape for model 'org/unknown'"):
        model_shape("org/unknown")


def test_kv_cache_bytes_per_token():
    assert SHAPES["Qwen/Qwen3-4B"].kv_bytes_per_token(2) == 2 * 36 * 8 * 128 * 2  # 144 KiB


def test_the_8xa100_plan_fits_with_each_process_on_its_gpu():
    mp = check_memory_plan(load_config(A100))
    where = {d.device: [p.name for p in d.processes] for d in mp.gpus}
    assert where["GPU 0"] == ["solver vllm server"] and where["GPU 1"] == ["proposer vllm server"]
    assert [where[f"GPU {g}"] for g in (2, 3, 4)] == [[f"solver trainer rank {r}/3"] for r in range(3)]
    assert [where[f"GPU {g}"] for g in (5, 6)] == [[f"proposer trainer rank {r}/2"] for r in range(2)]
    assert where["GPU 7"] == ["models.fixed vllm server"]
    assert all(d.capacity_gib == 80 and 0 < d.total < 80 for d in mp.gpus)
    # the 32B judge: ~61 GiB of bf16 weights inside its 0.9 x 80 GiB share, the rest KV cache
    judge = mp.gpus[-1].processes[0]
    assert (
        judge.parts["weights"] == pytest.approx(32.76e9 * 2 / GIB, rel=0.01) and judge.parts["kv cache"] > 2
    )


def test_the_h200_plan_fits_with_honest_headroom():
    mp = check_memory_plan(load_config(H200))
    (gpu,) = mp.gpus
    assert gpu.device == "GPU 0" and gpu.capacity_gib == 139 and len(gpu.processes) == 5
    assert gpu.headroom > 0.05 * gpu.capacity_gib


def test_the_old_h200_layout_is_refused_naming_the_gpu_and_the_shortfall():
    cfg = load_config(H200, OLD_H200)
    total = plan(cfg).gpus[0].total
    assert total > 250  # two ~94 GiB trainers and 108 GiB of vLLM shares
    with pytest.raises(UserError) as exc:
        check_memory_plan(cfg)
    msg = str(exc.value)
    assert f"GPU 0 needs {total:.1f} GiB of its 139.0 GiB, short by {total - 139:.1f} GiB" in msg
    assert "solver trainer rank 0/1 Qwen/Qwen3-4B" in msg and "models.fixed vllm server" in msg
    assert "train.sharding: fsdp2" in msg and "\n" not in msg


def test_a_server_whose_kv_cache_cannot_hold_one_sequence_is_refused():
    cfg = load_config(
        A100, {"models.fixed.serve.gpu_memory_utilization": 0.78}
    )  # 62 GiB: weights and little else
    with pytest.raises(
        UserError, match="models.fixed vllm server on GPU 7: its KV cache .* vLLM refuses to start"
    ):
        check_memory_plan(cfg)


def test_fsdp2_divides_the_trainer_states_by_the_ranks():
    t = load_config(A100).train
    shape = SHAPES["Qwen/Qwen3-4B"]
    sharded, _ = trainer_rank(shape, t, 3, on_gpu=True)
    whole, _ = trainer_rank(shape, t.model_copy(update={"sharding": "none"}), 3, on_gpu=True)
    assert whole["optimizer"] == pytest.approx(3 * sharded["optimizer"])
    # TRL wraps the reference root-only: every rank gathers all of it (it was counted a third)
    assert whole["reference"] == pytest.approx(sharded["reference"]) == pytest.approx(shape.params * 2 / GIB)
    assert sharded["grads"] == pytest.approx(shape.params * 4 / 3 / GIB)
    # accumulating over passes under no_sync, FSDP2 would keep the unsharded bf16 gradients between them; the
    # trainer reduce-scatters every pass (sync_each_batch), so the plan counts none
    from training import memory_plan

    accumulating, _ = trainer_rank(shape, t, 3, on_gpu=True, batch=t.micro_batch_size + 1)
    assert accumulating["grads"] == sharded["grads"]
    memory_plan.FSDP_SYNC_EACH_PASS = False
    try:
        no_sync, _ = trainer_rank(shape, t, 3, on_gpu=True, batch=t.micro_batch_size + 1)
    finally:
        memory_plan.FSDP_SYNC_EACH_PASS = True
    assert no_sync["grads"] - sharded["grads"] == pytest.approx(shape.params * 2 / GIB)
    assert whole["grads"] == pytest.approx(2 * shape.params * 4 / GIB)  # DDP's buckets: a second copy
    assert sharded["weights"] < whole["weights"] / 2


def test_beta_0_drops_the_reference_model():
    with_ref = plan(load_config(H200)).gpus[0]
    without = plan(load_config(H200, {"train.beta": 0.0})).gpus[0]
    refs = [p.parts.get("reference", 0) for p in with_ref.processes]
    # bf16 compute: the trainer builds its reference model in bf16 (2 bytes a parameter)
    assert sum(refs) == pytest.approx(2 * SHAPES["Qwen/Qwen3-1.7B"].params * 2 / GIB)
    assert all("reference" not in p.parts for p in without.processes)
    assert with_ref.total - without.total == pytest.approx(sum(refs))


def test_gradient_checkpointing_and_a_smaller_micro_batch_lower_the_activations():
    shape, t = SHAPES["Qwen/Qwen3-4B"], load_config(H200).train
    acts = [
        trainer_rank(shape, t.model_copy(update=u), 1, on_gpu=True)[0]["activations"]
        for u in ({}, {"micro_batch_size": 2}, {"gradient_checkpointing": False})
    ]
    assert acts[0] < acts[1] < acts[2]


def test_a_cpu_config_has_no_gpu_plan():
    mp = check_memory_plan(load_config(None))
    assert mp.gpus == [] and any("no GPU plan" in n for n in mp.notes)
    assert [d.device for d in mp.devices] == ["host"] and mp.fits


def test_a_gpu_config_without_its_gpus_memory_asks_for_it():
    cfg = load_config(A100, {"train.gpu_memory_gib": None})
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is visible: its memory is read from it")
    except ImportError:
        pass
    with pytest.raises(UserError, match="--gpu-gib"):
        plan(cfg)
    assert plan(cfg, gpu_gib=80).gpus[0].capacity_gib == 80


def test_sesa_plan_prints_the_plan_and_exits_0_or_2_with_one_line():
    runner, app = CliRunner(), build_app()
    ok = runner.invoke(app, ["plan", "-c", str(A100)])
    assert ok.exit_code == 0, ok.output
    assert "GPU 7" in ok.stdout and "Qwen/Qwen2.5-32B-Instruct" in ok.stdout and "headroom" in ok.stdout
    sets = [a for k, v in OLD_H200.items() for a in ("--set", f"{k}={v}")]
    bad = runner.invoke(app, ["plan", "-c", str(H200), *sets])
    assert bad.exit_code == 2
    assert "OVER by" in bad.stdout
    (line,) = bad.stderr.splitlines()
    assert line.startswith("error: qwen3-4b-h200 cannot fit its GPUs: GPU 0 needs") and "short by" in line


def test_sesa_train_refuses_a_layout_that_cannot_fit_before_anything_starts(tmp_path):
    from training.launch import train

    with pytest.raises(UserError, match="GPU 0 needs .* short by"):
        train(load_config(H200, OLD_H200), runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()  # no run directory, no process
