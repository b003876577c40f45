"""One policy's GRPO trainer process: ``python -m training.trainer RUN_DIR --role solver|proposer``.

TRL's ``GRPOTrainer`` does the optimization; generation is ours. Its ``rollout_func`` is the barrier of
``training.sync``: it publishes the current weights as version t ("weights synced for step t"), waits for
the orchestrator to commit step t, and returns this role's selected trajectories of step t -- prompt and
completion ids, sampled log-probs, ``env_mask`` (injected <information> tokens are not trained on) and
the reward as an extra field, which the reward function passes through.

Batch shape: the solver trains on ``questions_per_step x group_size`` rollouts with
``num_generations = group_size``. The proposer trains on one proposal per target with the whole step's
batch as its group (``num_generations = targets_per_step``): GRPO then compares each proposal to the
step's mean reward, since one proposal per prompt has no within-prompt variance.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from sesa_graph.config import RunConfig, load_config
from training.store import TrajectoryStore
from training.sync import PeerDiedError, SyncDir
from training.tracking import tensorboard_dir

log = logging.getLogger("sesa.trainer")


def batch_shape(cfg: RunConfig, role: str) -> tuple[int, int]:
    """(rollouts per step, num_generations) of a role's trainer."""
    if role == "solver":
        return cfg.train.questions_per_step * cfg.solver.group_size, cfg.solver.group_size
    return cfg.train.targets_per_step, cfg.train.targets_per_step


def micro_batches(batch: int, micro: int) -> tuple[int, int]:
    """(per-pass batch, accumulation steps): the largest divisor of ``batch`` not above ``micro``.

    >>> micro_batches(10, 2), micro_batches(10, 4), micro_batches(4, 8)
    ((2, 5), (2, 5), (4, 1))
    """
    size = max(d for d in range(1, min(batch, micro) + 1) if batch % d == 0)
    return size, batch // size


def rows_for_training(
    df: Any, expected: int, role: str, step: int, max_completion_length: int | None = None
) -> dict[str, list]:
    """The rollout_func output of one step's shard (selected rows, in group order). A completion longer than
    ``max_completion_length`` (injected documents count) is trained on its first that many tokens: the
    trainer's memory grows with sequence length, and TRL would cap a completion it generated itself there."""
    if "selected" in df.columns:
        df = df[df["selected"]]
    if len(df) != expected:
        raise RuntimeError(
            f"step {step}: {len(df)} {role} rollouts selected, the trainer's batch is {expected}"
        )
    cut = max_completion_length or None
    env_masks, completions, logprobs, truncated = [], [], [], 0
    for mask, trainable, ids, lps in zip(
        df["env_mask"], df["trainable"], df["completion_ids"], df["logprobs"]
    ):
        truncated += cut is not None and len(ids) > cut
        mask = [int(x) for x in mask[:cut]]
        env_masks.append(mask if trainable else [0] * len(mask))  # e.g. search_error: kept in shape, no loss
        completions.append([int(x) for x in ids[:cut]])
        logprobs.append([float(x) for x in lps[:cut]])
    if truncated:
        log.warning(
            "step %d: %d %s completions longer than train.max_completion_length=%d were cut to it",
            step,
            truncated,
            role,
            cut,
        )
    return {
        "prompt_ids": [[int(x) for x in v] for v in df["prompt_ids"]],
        "completion_ids": completions,
        "logprobs": logprobs,
        "env_mask": env_masks,
        "reward": [float(r) for r in df["reward"]],
    }


def passthrough_reward(prompts: list, completions: list, reward: list[float], **kwargs: Any) -> list[float]:
    """The judge-derived reward the orchestrator computed, carried as rollout_func's ``reward`` field.

    >>> passthrough_reward(["p", "p"], ["a", "b"], reward=[1.0, 0.0])
    [1.0, 0.0]
    """
    return [float(r) for r in reward]


def vllm_server_args(pcfg: Any, role: str) -> dict[str, Any]:
    """TRL server mode: this trainer syncs weights (NCCL) into its own `vllm serve` process, which the
    orchestrator also generates from; each role gets its own group port."""
    if pcfg.backend != "openai" or not pcfg.base_url:
        raise ValueError(f"train.use_vllm needs {role}_policy.backend 'openai' with the vLLM base_url")
    return {
        "vllm_mode": "server",
        "vllm_server_base_url": pcfg.base_url.removesuffix("/").removesuffix("/v1"),
        "vllm_group_port": 51216 + (0 if role == "solver" else 1),
    }


def grpo_config_kwargs(cfg: RunConfig, role: str, out_dir: Path) -> dict[str, Any]:
    """The arguments of one role's TRL ``GRPOConfig`` (a function, so they can be checked without a trainer)."""
    pcfg = cfg.solver_policy if role == "solver" else cfg.proposer_policy
    on_cpu = pcfg.device == "cpu"
    batch, n_gen = batch_shape(cfg, role)
    temperature = cfg.solver.temperature if role == "solver" else cfg.proposer.temperature
    per_pass, accumulation = micro_batches(batch, cfg.train.micro_batch_size)
    tc = cfg.train
    return dict(
        output_dir=str(out_dir),
        per_device_train_batch_size=per_pass,
        gradient_checkpointing=tc.gradient_checkpointing,
        gradient_accumulation_steps=accumulation,
        num_generations=n_gen,
        max_steps=tc.steps,
        learning_rate=tc.learning_rate,
        lr_scheduler_type=tc.lr_scheduler,
        warmup_steps=tc.warmup_steps,
        beta=tc.beta,
        loss_type=tc.loss_type,
        # None leaves TRL's default (the upper clip bound equals the lower one)
        **({"epsilon_high": tc.epsilon_high} if tc.epsilon_high is not None else {}),
        max_completion_length=tc.max_completion_length,
        temperature=max(temperature, 1e-3),
        use_cpu=on_cpu,
        bf16=False if on_cpu else pcfg.dtype == "bfloat16",
        save_strategy="steps",
        save_steps=1,
        save_total_limit=1,
        logging_steps=1,
        report_to=[] if tc.report_to == "none" else [tc.report_to],
        seed=cfg.seed,
        use_vllm=tc.use_vllm,
        **(vllm_server_args(pcfg, role) if tc.use_vllm else {}),
        shuffle_dataset=False,
        disable_tqdm=True,
    )


def latest_checkpoint(out_dir: Path) -> str | None:
    """The newest complete checkpoint; newer incomplete ones are removed.

    transformers writes ``trainer_state.json`` last (after weights, optimizer, scheduler and RNG state), so
    a trainer killed while saving leaves a directory without a readable one; resuming from it would crash,
    and the checkpoint before it (kept until the new one is complete) holds the state to go on from.
    """
    ckpts = sorted(
        (p for p in out_dir.glob("checkpoint-*") if p.name.split("-")[1].isdigit()),
        key=lambda p: int(p.name.split("-")[1]),
    )
    while ckpts:
        newest = ckpts.pop()
        try:
            json.loads((newest / "trainer_state.json").read_text())
            return str(newest)
        except (OSError, ValueError):
            log.warning("%s is incomplete (the trainer was stopped while saving it); removing it", newest)
            shutil.rmtree(newest, ignore_errors=True)
    return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--role", choices=("solver", "proposer"), required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {args.role}-trainer %(levelname)s: %(message)s"
    )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from sesa_graph.embedded import resolve_policy_model

    cfg = load_config(args.run_dir / "config.yaml")
    role = args.role
    pcfg = cfg.solver_policy if role == "solver" else cfg.proposer_policy
    on_cpu = pcfg.device == "cpu"
    if on_cpu:
        from sesa_graph.policy.local import keep_freed_memory

        torch.set_num_threads(cfg.train.trainer_threads)
        torch.set_flush_denormal(True)
        keep_freed_memory()
    sync, store = SyncDir(args.run_dir), TrajectoryStore(args.run_dir)
    batch, _ = batch_shape(cfg, role)
    out_dir = args.run_dir / "checkpoints" / role
    if cfg.train.report_to == "tensorboard":
        # transformers' callback reads this when the trainer is built; unset it writes ./runs/<date>_<host>,
        # a directory `sesa` would take for a run
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(tensorboard_dir(args.run_dir, role))
    grpo = GRPOConfig(**grpo_config_kwargs(cfg, role, out_dir))
    path = resolve_policy_model(pcfg.model if pcfg.backend == "local" else (pcfg.train_model or pcfg.model))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32 if on_cpu else getattr(torch, pcfg.dtype)
    )

    parent = os.getppid()

    def orchestrator_gone() -> str | None:  # a kill -9 of `sesa train` must not leave trainers waiting
        return f"the orchestrator (pid {parent}) is gone" if os.getppid() != parent else None

    def rollout_func(prompts: list, trainer: Any) -> dict[str, list]:
        step = trainer.state.global_step
        sync.publish_weights(role, step, lambda d: trainer.model.save_pretrained(d, safe_serialization=True))
        sync.mark_ready(role, step)
        log.info("weights for step %d published; waiting for the step's trajectories", step)
        sync.wait(
            lambda: sync.is_committed(step),
            f"step {step} trajectories",
            cfg.train.wait_timeout_s,
            alive=orchestrator_gone,
        )
        out = rows_for_training(
            store.read(step, role), len(prompts), role, step, cfg.train.max_completion_length
        )
        return out

    dataset = Dataset.from_dict({"prompt": [f"{role} self-play"] * (batch * cfg.train.steps)})
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[passthrough_reward],
        args=grpo,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout_func,
    )
    try:
        trainer.train(resume_from_checkpoint=latest_checkpoint(out_dir))
    except PeerDiedError as exc:
        log.error("%s", exc)
        raise SystemExit(3) from None
    final = args.run_dir / "policies" / role
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    (final / ".complete").write_text("ok\n")
    log.info("done: %s", final)


if __name__ == "__main__":
    main()
