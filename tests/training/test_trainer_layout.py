"""The trainer jobs' layout and numerics as the config and the launcher see them (no training started): ranks
against the batch, rendezvous ports, the launcher's command, per-rank batches, precision, checkpoint cadence."""

from pathlib import Path

import pytest

from sesa_graph.config import ConfigError, load_config
from sesa_graph.precision import check_param_dtype, resolve_compute_dtype, spacing
from training.step_feed import rank_slice
from training.trainer import grpo_config_kwargs
from training.trainer_jobs import failure_message, launcher_command

GPU = Path(__file__).resolve().parents[2] / "configs" / "qwen3-4b-8xa100.yaml"


def _cfg(**train):
    return load_config(overrides={f"train.{k}": v for k, v in train.items()})


def test_ranks_that_do_not_divide_the_groups_are_refused_naming_both_numbers():
    with pytest.raises(ConfigError, match=r"3 ranks do not divide its 4 groups \(train.questions_per_step\)"):
        _cfg(questions_per_step=4, trainer_ranks={"solver": 3}, trainer_launcher=["torchrun"])
    with pytest.raises(ConfigError, match=r"proposer trainer's 3 ranks do not divide its 4 groups"):
        _cfg(targets_per_step=4, trainer_ranks={"proposer": 3}, trainer_launcher=["torchrun"])
    ok = _cfg(questions_per_step=4, trainer_ranks={"solver": 2}, trainer_launcher=["torchrun"])
    assert ok.train.ranks("solver") == 2 and ok.train.ranks("proposer") == 1


def test_two_roles_on_one_port_and_a_launcherless_multi_rank_job_are_refused():
    with pytest.raises(ConfigError, match="both trainer jobs port 29500"):
        _cfg(rendezvous_ports={"solver": 29500, "proposer": 29500})
    with pytest.raises(ConfigError, match="trainer_launcher is empty"):
        _cfg(trainer_ranks={"solver": 2})
    with pytest.raises(ConfigError, match="knows how to pass ranks and ports to torchrun and accelerate"):
        _cfg(trainer_launcher=["deepspeed"])


@pytest.mark.parametrize(
    "launcher",
    [
        ["/tmp/x/torchrun"],  # another program of that name
        [
            "torchrun",
            "--no-python",
            "/bin/sh",
            "-c",
            "id",
        ],  # the hostile-config check: a shell on a trainer node
        ["accelerate", "launch", "--no_python"],
        ["torchrun", "--module=os"],
        ["accelerate", "launch", "-m", "http.server"],
    ],
)
def test_a_launcher_that_would_run_another_program_is_refused(launcher):
    with pytest.raises(ConfigError, match="trainer_launcher"):
        _cfg(trainer_launcher=launcher)
    with pytest.raises(ConfigError, match="solver_policy.port"):
        load_config(overrides={"solver_policy.port": 29510})


def test_gpu_ranks_follow_the_gpus_and_must_match_them():
    gpu = load_config(GPU)
    assert (gpu.train.ranks("solver"), gpu.train.ranks("proposer")) == (3, 2)
    with pytest.raises(ConfigError, match=r"trainer_ranks.solver is 2 but train.trainer_gpus.solver lists 3"):
        load_config(GPU, {"train.trainer_ranks": {"solver": 2}, "train.questions_per_step": 66})


def test_bf16_master_weights_are_refused_when_a_step_would_round_away():
    assert spacing("bfloat16", 0.02) == pytest.approx(1.22e-4, rel=1e-2)
    with pytest.raises(ValueError, match="can only move in steps of 0.00012.*param_dtype: float32"):
        check_param_dtype("bfloat16", 1e-6, "adamw_torch")
    check_param_dtype("bfloat16", 1e-3, "adamw_torch")  # a step larger than the spacing survives
    check_param_dtype("float32", 1e-9, "adamw_torch")
    with pytest.raises(ConfigError, match="train.param_dtype is bfloat16 with train.learning_rate 1e-06"):
        _cfg(param_dtype="bfloat16", learning_rate=1e-6)


def test_launcher_commands_carry_ranks_and_each_roles_port():
    gpu = load_config(GPU)
    solver, proposer = launcher_command(gpu, "solver"), launcher_command(gpu, "proposer")
    assert solver[:2] == [_beside("accelerate"), "launch"] and "--multi_gpu" in solver
    assert (
        solver[solver.index("--num_processes") + 1] == "3"
        and proposer[proposer.index("--num_processes") + 1] == "2"
    )
    ports = {c[c.index("--main_process_port") + 1] for c in (solver, proposer)}
    assert ports == {"29510", "29520"}
    assert solver[solver.index("--main_process_ip") + 1] == "127.0.0.1"
    assert solver[solver.index("--mixed_precision") + 1] == "bf16"
    torch = _cfg(trainer_launcher=["torchrun"], trainer_ranks={"solver": 2})
    cmd = launcher_command(torch, "solver")
    assert cmd[:1] == [_beside("torchrun")] and cmd[cmd.index("--nproc-per-node") + 1] == "2"
    assert (
        cmd[cmd.index("--master-port") + 1] == "29510" and cmd[cmd.index("--master-addr") + 1] == "127.0.0.1"
    )
    assert len(launcher_command(_cfg(), "solver")) == 1  # no launcher: this Python


def test_each_rank_gets_a_per_device_batch_of_its_share_and_its_own_slice():
    cfg = _cfg(
        questions_per_step=4, trainer_ranks={"solver": 2}, trainer_launcher=["torchrun"], micro_batch_size=5
    )
    one = grpo_config_kwargs(cfg, "solver", Path("/tmp/x"), world=1)
    two = grpo_config_kwargs(cfg, "solver", Path("/tmp/x"), world=2)
    assert one["per_device_train_batch_size"] * one["gradient_accumulation_steps"] == 20
    assert two["per_device_train_batch_size"] * two["gradient_accumulation_steps"] == 10
    assert two["ddp_backend"] == "gloo" and "ddp_backend" not in one
    rows = {"reward": list(range(20)), "prompt_ids": [[i] for i in range(20)]}
    halves = [rank_slice(rows, r, 2) for r in (0, 1)]
    assert halves[0]["reward"] == list(range(10)) and halves[1]["reward"] == list(range(10, 20))
    assert halves[0]["reward"] + halves[1]["reward"] == rows["reward"]  # whole groups of 5, in order


def test_precision_and_checkpoint_cadence_reach_the_trainer():
    cfg = _cfg(save_every=3, beta=0.01)
    bf16 = grpo_config_kwargs(cfg, "solver", Path("/tmp/x"), compute="bfloat16")
    fp32 = grpo_config_kwargs(cfg, "solver", Path("/tmp/x"), compute="float32")
    assert bf16["bf16"] and not fp32["bf16"]
    # the reference model: bf16 when computing in bf16, and never device_map "auto" (TRL's default for it on
    # CUDA under FSDP split it over every visible GPU; on CPU TRL chooses None itself, so only the kwargs show it)
    assert bf16["model_init_kwargs"] == {"device_map": None, "dtype": "bfloat16"}
    assert fp32["model_init_kwargs"] == {"device_map": None}
    assert "model_init_kwargs" not in grpo_config_kwargs(_cfg(beta=0.0), "solver", Path("/tmp/x"))
    assert bf16["save_steps"] == 3 and bf16["save_total_limit"] == 1
    # one run, one tracker project: the trainers beside the self-play curves (NAME-selfplay)
    assert (bf16["run_name"], bf16["project"]) == (f"{cfg.name}-solver", "sesa-graph")
    assert _cfg().train.save_every == 5
    assert resolve_compute_dtype("float32", "cpu") == "float32"
    assert resolve_compute_dtype("auto", "cpu") in ("bfloat16", "float32")


def test_fsdp2_is_passed_to_gpu_jobs_only():
    gpu = load_config(GPU)
    kw = grpo_config_kwargs(gpu, "solver", Path("/tmp/x"), world=3, compute="bfloat16")
    assert kw["fsdp"] is True and kw["fsdp_config"]["version"] == 2
    assert kw["gradient_checkpointing"] is False and kw["fsdp_config"]["activation_checkpointing"] is True
    # reduce-scatter every pass, not unsharded bf16 gradients kept over the step's passes (issue 45, finding 4);
    # transformers hands it to accelerate's GradientAccumulationPlugin (shown on GPUs only: FSDP needs them)
    assert kw["accelerator_config"] == {"gradient_accumulation_kwargs": {"sync_each_batch": True}}
    from transformers import TrainingArguments

    args = TrainingArguments("/tmp/x", accelerator_config=kw["accelerator_config"], use_cpu=True)
    assert args.accelerator_config.gradient_accumulation_kwargs == {"sync_each_batch": True}
    cpu = load_config(GPU, {"solver_policy.device": "cpu", "proposer_policy.device": "cpu"})
    cpu_kw = grpo_config_kwargs(cpu, "solver", Path("/tmp/x"), world=3)
    assert "fsdp" not in cpu_kw and "accelerator_config" not in cpu_kw


def test_a_dead_rank_is_named_from_the_launchers_report(tmp_path):
    log = tmp_path / "solver-trainer.log"
    log.write_text(
        "Root Cause (first observed failure):\n[0]:\n  time : now\n  host : localhost\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 12)\n"
    )
    (tmp_path / "solver-trainer.rank1.log").write_text("rank one was here\n")
    msg = failure_message("solver", 1, log)
    assert "rank 1 failed" in msg and "rank one was here" in msg and "solver-trainer.rank1.log" in msg
    log.write_text("plain crash\n")
    assert "plain crash" in failure_message("solver", 1, log)


def _beside(name: str) -> str:
    """The launcher sesa runs: the one installed beside its interpreter (the venv's)."""
    import sys
    from pathlib import Path

    return str(Path(sys.executable).parent / name)


def test_a_users_accelerate_config_does_not_reach_our_jobs(tmp_path):
    """`accelerate launch` without --config_file applied ~/.cache/huggingface/accelerate/default_config.yaml,
    whose gpu_ids replace CUDA_VISIBLE_DEVICES: the solver's ranks could land on the vLLM GPUs. The command now
    names our config (it named none before), and a real launch of two CPU ranks beside a hostile default config
    starts under it. (accelerate applies gpu_ids only where CUDA is available: that half needs a GPU.)"""
    import os
    import subprocess

    import yaml

    from training.trainer_jobs import ACCELERATE_CONFIG, JOB_ENV_DEFAULTS

    home = tmp_path / "hf"
    (home / "accelerate").mkdir(parents=True)
    (home / "accelerate" / "default_config.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\ngpu_ids: '5,6'\n"
        "num_processes: 2\nmixed_precision: fp16\n"
    )
    probe = tmp_path / "probe.py"
    # each rank writes a file of its own: two ranks printing to one pipe interleaved their lines
    probe.write_text(
        "import os, pathlib; pathlib.Path(__file__).with_name('rank-' + os.environ['RANK']).write_text("
        "' '.join(str(os.environ.get(k)) for k in ('CUDA_VISIBLE_DEVICES', 'ACCELERATE_MIXED_PRECISION')))\n"
    )
    from tools.ports import free_port

    cfg = _cfg(
        trainer_ranks={"solver": 2},
        compute_dtype="float32",
        trainer_launcher=["accelerate", "launch"],
        rendezvous_ports={"solver": free_port(), "proposer": free_port()},  # not the fixed 29510 of a run
    )
    cmd = launcher_command(cfg, "solver")
    assert cmd[cmd.index("--config_file") + 1] == str(ACCELERATE_CONFIG) and ACCELERATE_CONFIG.is_file()
    assert "gpu_ids" not in yaml.safe_load(ACCELERATE_CONFIG.read_text())
    env = dict(os.environ, HF_HOME=str(home), CUDA_VISIBLE_DEVICES="")
    env.pop("CUDA_VISIBLE_DEVICES")
    out = subprocess.run(
        [*cmd, str(probe)], check=False, env=env, capture_output=True, text=True, timeout=300
    )
    ranks = {p.name: p.read_text() for p in sorted(tmp_path.glob("rank-*"))}
    assert ranks == {"rank-0": "None no", "rank-1": "None no"}, out.stdout + out.stderr[-2000:]
    assert JOB_ENV_DEFAULTS["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
