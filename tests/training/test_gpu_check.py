"""The prepared CUDA check (scripts/gpu_check.sh, training/gpu_check.py) kept from rotting: its CPU mode runs the
real trainer job through the wrapper and the launcher on tiny shapes, and what only a GPU run exercises -- the
one-rank FSDP2 launch, the model that fits the card -- is checked from the commands and the plan."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sesa_graph.config import load_config
from sesa_graph.fsutil import dump_yaml
from training import gpu_check_parts as parts
from training.trainer import grpo_config_kwargs
from training.trainer_jobs import launcher_command
from training.trainer_rows import update_record

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "configs" / "qwen3-4b-8xa100.yaml"


def _check_cfg(tmp_path: Path, device: str):
    raw = parts.check_config(yaml.safe_load(GPU.read_text()), tmp_path / "model", device, 2, [30011, 30012])
    (tmp_path / "config.yaml").write_text(dump_yaml(raw))
    return load_config(tmp_path / "config.yaml")


@pytest.mark.slow
def test_cpu_mode_trains_through_the_launcher_and_reports_the_figures(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--cpu", "--out", str(out), "--workdir", str(tmp_path / "w")]
        + ["--peak-tflops", "1", "--timeout-s", "170"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    r = json.loads((out / "gpu_check.json").read_text())
    assert r["ok"] and r["problems"] == [], r["problems"]
    assert r["launch"]["command"][0].endswith("/accelerate") and r["launch"]["command"][1] == "launch"
    assert "training.trainer" in r["launch"]["command"]
    # accelerate runs FSDP on GPU device types only: the CPU rank has no process group (docs/GPU-CHECK.md)
    assert r["launch"]["distributed_type"] == "NO" and r["launch"]["sharding"] == "fsdp2"
    assert r["launch"]["param_dtype"] == "float32"
    assert r["tokens"] == 10 * (parts.TINY_PROMPT + parts.TINY_COMPLETION)
    assert r["update_s"] > 0 and r["tokens_per_s"] > 0 and 0 < r["mfu"]
    learn = r["learning"]
    assert len(learn["updates_logged"]) == 2  # the config's 2 updates a step, each with its own gradient
    assert all(math.isfinite(u["grad_norm"]) and u["grad_norm"] > 0 for u in learn["updates_logged"])
    assert learn["weight_change_l2"] > 0 and learn["tensors_unchanged_count"] == 0
    # Adam's first steps move a weight by about the learning rate each: 2 updates, at most ~2 x lr
    assert learn["max_abs_change"] < 3 * learn["learning_rate"]
    assert r["memory"]["measured_gib"] > 0 and r["memory"]["plan_gib"] > 0
    assert (out / "trainer.log").exists() and not (tmp_path / "w" / "gpu-check").exists()


def test_one_fsdp2_gpu_rank_gets_accelerates_fsdp_launcher_and_fsdp(tmp_path):
    gpu = _check_cfg(tmp_path, "cuda")
    cmd = launcher_command(gpu, "solver")
    # accelerate refuses --multi_gpu for one process, and its plain launcher leaves transformers without
    # torch.distributed, which then refuses FSDP
    assert cmd[cmd.index("--use_fsdp") + 1 : cmd.index("--use_fsdp") + 3] == ["--fsdp_version", "2"]
    assert "--multi_gpu" not in cmd and cmd[cmd.index("--num_processes") + 1] == "1"
    kw = grpo_config_kwargs(gpu, "solver", tmp_path, world=1, compute="bfloat16")
    assert kw["fsdp"] is True and kw["fsdp_config"]["version"] == 2 and kw["bf16"]
    assert kw["max_completion_length"] == 8192 and kw["model_init_kwargs"]["device_map"] is None
    cpu = _check_cfg(tmp_path, "cpu")
    assert "--use_fsdp" not in launcher_command(cpu, "solver")
    assert "fsdp" not in grpo_config_kwargs(cpu, "solver", tmp_path, world=1)


def test_the_model_is_the_configs_4b_where_its_rank_fits_else_the_17b(tmp_path):
    t = _check_cfg(tmp_path, "cuda").train
    assert parts.pick_model("Qwen/Qwen3-4B", t, 5, 139.0) == "Qwen/Qwen3-4B"  # an H200
    assert parts.pick_model("Qwen/Qwen3-4B", t, 5, 79.1) == "Qwen/Qwen3-1.7B"  # an H100-80GB
    assert parts.peak_bf16("NVIDIA H100 80GB HBM3") == parts.peak_bf16("NVIDIA H200") == 989e12
    assert parts.peak_bf16("NVIDIA H100 PCIe") == 756e12 and parts.peak_bf16("cpu") is None


def test_the_flop_count_follows_trls_passes(tmp_path):
    cfg = _check_cfg(tmp_path, "cuda")
    f = parts.flops_per_step(parts.SHAPES["Qwen/Qwen3-4B"], cfg, 1024, 8192, 10)
    # train forward + backward (3), TRL's old log-probs (2 updates a batch) and the reference (beta 0.01)
    assert f["forward_passes"] == 5 and f["old_logprob_pass"] and f["reference_pass"]
    layers = 2 * 36 * parts.SHAPES["Qwen/Qwen3-4B"].layer_params * 9216 * 10 * 5
    assert layers < f["per_step"] < 1.6 * layers


def test_the_rank_reports_its_update_time_and_peak_memory():
    rec = update_record([{"loss": 0.5, "grad_norm": 1.5, "step": 2}], 12.3456)
    assert rec["loss"] == 0.5 and rec["grad_norm"] == 1.5 and rec["update_s"] == 12.346
    assert rec["host_peak_rss_gib"] > 0
    assert update_record([], 1.0) is None  # before the first update there is nothing to report


def test_a_user_error_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "training.gpu_check", "--cpu", "-c", str(tmp_path / "none.yaml")],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert done.stderr.startswith("gpu_check: no config at")
    helped = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--help"], check=False, cwd=ROOT, capture_output=True, text=True
    )
    assert helped.returncode == 0 and "--bundle" in helped.stdout and "--cpu" in helped.stdout
