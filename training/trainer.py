"""One policy's GRPO trainer job: ``python -m training.trainer WORKDIR --role solver|proposer --coordinator
HOST:PORT`` (under a launcher for several ranks; ``sesa train`` or ``sesa trainers`` builds the command).

TRL's ``GRPOTrainer`` does the optimization; generation is ours. Its ``rollout_func`` is the barrier of
``training.coordinator``: it publishes the current weights as version t ("weights synced for step t"), waits
for the orchestrator to commit step t, and returns this role's selected trajectories of step t -- prompt and
completion ids, sampled log-probs, ``env_mask`` (injected <information> tokens are not trained on) and
the reward as an extra field, which the reward function passes through.

Batch shape: the solver trains on ``questions_per_step x group_size`` rollouts with
``num_generations = group_size``. The proposer trains on one proposal per target with the whole step's
batch as its group (``num_generations = targets_per_step``): GRPO then compares each proposal to the
step's mean reward, since one proposal per prompt has no within-prompt variance (``train.proposer_advantage:
raw`` gives it its reward instead, as [SSP]). Each step's batch is split into ``train.updates_per_step``
minibatches, one optimizer step each ([SSP] 2), before the weights are published.

Under a launcher (``train.trainer_ranks``) each rank takes its own contiguous slice of whole groups of the
step's batch (TRL gathers the rewards of all ranks before it takes advantages, so the proposer's batch-wide
group gives the same advantages split as whole) and DDP averages the gradients; only rank 0 publishes the
weights, after the ranks agree on them (FSDP2: the gathered full state dict). Weights are trained in
``train.param_dtype`` (fp32 master weights), computed in ``train.compute_dtype`` (bf16 autocast).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from sesa_graph.config import RunConfig
from tools.errors import ServiceError, UserError
from training.disk_check import disk_check_callback
from training.grpo_update import grpo_trainer_class
from training.model_card import write_model_card
from training.ranks import Rank, exit_now, start_watchdog, this_rank, use_own_log
from training.step_feed import StepFeed, send_weights
from training.sync import PeerDiedError, SyncDir
from training.tracking import TRACKER_PROJECT, tensorboard_dir
from training.trainer_setup import Setup, cleanup_sent, come_up, shared_checkpoint

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
    if not isinstance(pcfg.base_url, str):
        raise ValueError(  # noqa: TRY004 - a config value, reported as the config's errors are
            f"train.use_vllm sends the weights over NCCL to one server: give {role}_policy.base_url one URL, "
            f"not {len(pcfg.base_url)} replicas"
        )
    return {
        "vllm_mode": "server",
        "vllm_server_base_url": pcfg.base_url.removesuffix("/").removesuffix("/v1"),
        "vllm_group_port": 51216 + (0 if role == "solver" else 1),
    }


def grpo_config_kwargs(
    cfg: RunConfig, role: str, out_dir: Path, world: int = 1, compute: str = "float32"
) -> dict[str, Any]:
    """The arguments of one role's TRL ``GRPOConfig`` for a job of ``world`` ranks computing in ``compute``
    (a function, so they can be checked without a trainer)."""
    pcfg = cfg.solver_policy if role == "solver" else cfg.proposer_policy
    on_cpu = pcfg.device == "cpu"
    batch, n_gen = batch_shape(cfg, role)
    temperature = cfg.solver.temperature if role == "solver" else cfg.proposer.temperature
    tc = cfg.train
    updates = tc.updates_per_step
    per_pass, accumulation = micro_batches(batch // world // updates, tc.micro_batch_size)
    bf16 = compute == "bfloat16"
    # one rank shards nothing, but under a launcher it still runs FSDP2's wrapping and mixed precision (what
    # scripts/gpu_check.sh measures on one GPU); without one transformers refuses FSDP outside torch.distributed
    fsdp = tc.sharding == "fsdp2" and not on_cpu and (world > 1 or bool(tc.trainer_launcher))
    return dict(
        output_dir=str(out_dir),
        per_device_train_batch_size=per_pass,
        # FSDP2 checkpoints activations itself (transformers' gradient checkpointing adds an all-gather)
        gradient_checkpointing=tc.gradient_checkpointing and not fsdp,
        gradient_accumulation_steps=accumulation,
        # a step's batch is one generation, split into `updates` minibatches of one optimizer step each; TRL
        # then scores the old log-probs when the batch arrives, so the later updates' ratio is not 1
        steps_per_generation=accumulation * updates,
        num_generations=n_gen,
        # TRL counts optimizer steps: `updates` of them a self-play step
        max_steps=tc.steps * updates,
        learning_rate=tc.learning_rate,
        lr_scheduler_type=tc.lr_scheduler,
        warmup_steps=tc.warmup_steps * updates,
        beta=tc.beta,
        loss_type=tc.loss_type,
        # None leaves TRL's default (the upper clip bound equals the lower one)
        **({"epsilon_high": tc.epsilon_high} if tc.epsilon_high is not None else {}),
        max_completion_length=tc.max_completion_length,
        temperature=max(temperature, 1e-3),
        use_cpu=on_cpu,
        bf16=bf16,  # autocast (or FSDP2's mixed-precision policy) over fp32 master weights
        optim=tc.optim,
        # TRL builds the reference model from these: it only scores, so bf16 halves its memory; device_map None
        # because TRL sets it only under DDP/DeepSpeed, and under FSDP its "auto" spread the reference over every
        # visible GPU with accelerate's hooks left on (trl/trainer/utils.py create_model_from_path)
        **(
            {"model_init_kwargs": {"device_map": None, **({"dtype": "bfloat16"} if bf16 else {})}}
            if tc.beta > 0
            else {}
        ),
        **({"ddp_backend": "gloo"} if on_cpu and world > 1 else {}),
        # ranks other than 0 wait in a collective while the orchestrator runs a step's rollouts
        ddp_timeout=int(tc.wait_timeout_s) + 300,
        # FSDP2: reduce-scatter every pass. Accumulating under no_sync kept the unsharded gradients, in bf16, for
        # the whole step (torch/distributed/fsdp/_fully_shard/_fsdp_param.py): +2 bytes a parameter on every rank
        # and bf16 sums over up to 55 passes; each pass's bf16 reduction now adds into the fp32 sharded gradient
        **(
            {"accelerator_config": {"gradient_accumulation_kwargs": {"sync_each_batch": True}}}
            if fsdp
            else {}
        ),
        **(
            {
                "fsdp": True,
                "fsdp_config": {
                    "version": 2,
                    "reshard_after_forward": True,
                    "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                    "activation_checkpointing": tc.gradient_checkpointing,
                },
            }
            if fsdp
            else {}
        ),
        save_strategy="steps",
        save_steps=tc.save_every * updates,  # at a step's end; transformers also saves after the last step
        save_total_limit=1,  # the newest complete one; the one before is removed only once it is written
        logging_steps=1,
        report_to=[] if tc.report_to == "none" else [tc.report_to],
        # one run in one project: the trainers' curves beside the self-play curves (training.tracking), not in
        # trackio's default project "huggingface" under a generated name
        run_name=f"{cfg.name}-{role}",
        project=TRACKER_PROJECT,
        seed=cfg.seed,
        use_vllm=tc.use_vllm,
        **(vllm_server_args(pcfg, role) if tc.use_vllm else {}),
        shuffle_dataset=False,
        disable_tqdm=True,
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "workdir",
        type=Path,
        help="this node's folder for the job: checkpoints/, policies/, logs/ (local trainers: the run directory)",
    )
    ap.add_argument("--role", choices=("solver", "proposer"), required=True)
    ap.add_argument(
        "--coordinator",
        required=True,
        help="HOST:PORT of the orchestrator's coordinator (sesa train prints it)",
    )
    ap.add_argument(
        "-c",
        "--config",
        type=Path,
        help="this node's copy of the run config; refused, naming the keys, if it differs from the orchestrator's",
    )
    ap.add_argument(
        "--connect-timeout-s", type=float, default=120.0, help="how long to try to reach the coordinator"
    )
    args = ap.parse_args(argv)
    rank = this_rank()
    job_log = args.workdir / "logs" / f"{args.role}-trainer.log"
    job_log.parent.mkdir(parents=True, exist_ok=True)
    use_own_log(job_log, rank)
    tag = f"{args.role}-trainer" + (f"[{rank.rank}/{rank.world}]" if rank.world > 1 else "")
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {tag} %(levelname)s: %(message)s")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    # TRL checks the installed vLLM against the range its own vLLM generation path supports, once per import
    # of a module that asks (5 times a job); these jobs never generate through TRL (the rollouts come from
    # rollout_func, the servers are ours), so the warning says nothing about them
    warnings.filterwarnings("ignore", message="TRL currently supports vLLM versions", category=UserWarning)
    start_watchdog(args.role, rank)
    setup = None
    try:
        setup = come_up(
            args.workdir, args.role, rank, job_log, args.coordinator, args.config, args.connect_timeout_s
        )
        train_role(args.workdir, args.role, rank, setup)
    except (PeerDiedError, UserError, ServiceError) as exc:
        # nothing is left to save (checkpoints are written in full before a step goes on), and a normal
        # interpreter exit with a process group and TRL loaded took ~8 s: a launcher waits for that
        if setup is not None and setup.link is not None:
            setup.link.fail(f"the {args.role} trainer stopped on {socket.gethostname()}: {exc}")
        exit_now(str(exc))
    except BaseException as exc:
        if setup is not None and setup.link is not None and not isinstance(exc, KeyboardInterrupt):
            setup.link.fail(
                f"the {args.role} trainer failed on {socket.gethostname()}: {type(exc).__name__}: {exc} "
                f"(log: {job_log} there)"
            )
        raise
    # everything is written and reported: skip the interpreter's teardown, in which the store clients of the
    # heartbeat threads aborted a finished rank ("terminate called without an active exception", seen in the
    # two-node test) and its launcher then reported a failure
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


def train_role(workdir: Path, role: str, rank: Rank, setup: Setup) -> None:
    """Train ``role``'s policy with TRL's GRPO for the run's steps on the trajectories the orchestrator
    commits, publishing its weights before each step's rollouts; then save the final policy."""
    cfg, link = setup.cfg, setup.link
    transport = cfg.cluster.weight_transport(cfg.train.use_vllm)

    from datasets import Dataset
    from trl import GRPOConfig

    from sesa_graph.precision import resolve_compute_dtype
    from training.warmup.sft import trained_positions_only

    pcfg = cfg.solver_policy if role == "solver" else cfg.proposer_policy
    on_cpu = pcfg.device == "cpu"
    if on_cpu:
        _cpu_setup(cfg, rank)
    batch, _ = batch_shape(cfg, role)
    out_dir = workdir / "checkpoints" / role
    if cfg.train.report_to == "tensorboard" and rank.main:
        # transformers' callback reads this when the trainer is built; unset it writes ./runs/<date>_<host>,
        # a directory `sesa` would take for a run
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(tensorboard_dir(workdir, role))
    compute = resolve_compute_dtype(cfg.train.compute_dtype, pcfg.device)
    grpo = GRPOConfig(**grpo_config_kwargs(cfg, role, out_dir, rank.world, compute))
    tokenizer, model = _load_policy(cfg, pcfg)
    if rank.main:
        log.info(
            "%d rank(s), %s master weights, %s compute, %d rollouts a step (%d a rank), weights by %s",
            rank.world,
            cfg.train.param_dtype,
            compute,
            batch,
            batch // rank.world,
            transport,
        )
    feed = StepFeed(cfg, role, rank, link, SyncDir(workdir), transport, batch, tokenizer)
    # the policy is passed built (fp32); model_init_kwargs only set the reference model's dtype, which TRL's
    # warning that they are "ignored" would misreport
    logging.getLogger("trl.trainer.grpo_trainer").addFilter(
        lambda r: "model_init_kwargs" not in r.getMessage()
    )
    dataset = Dataset.from_dict({"prompt": [f"{role} self-play"] * (batch * cfg.train.steps)})
    raw = role == "proposer" and cfg.train.proposer_advantage == "raw"
    trainer = grpo_trainer_class(raw)(
        model=model,
        reward_funcs=[passthrough_reward],
        args=grpo,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=feed.rollout_func,
    )
    trainer.add_callback(disk_check_callback(out_dir, sum(p.numel() for p in model.parameters())))
    if rank.main:
        acc = trainer.accelerator
        log.info("autocast: %s; distributed: %s", acc.mixed_precision, acc.distributed_type.value)
    sharded = cfg.train.sharding == "fsdp2" and not on_cpu
    checkpoint = shared_checkpoint(out_dir, rank, setup.jobs, sharded)
    scoring = trained_positions_only() if cfg.train.score_trained_positions_only else nullcontext(False)
    with scoring as compact:
        if rank.main:
            log.info("trained positions only: %s; resuming from %s", compact, checkpoint)
        trainer.train(resume_from_checkpoint=checkpoint)
    cleanup_sent(setup.jobs, rank, checkpoint)
    _save_final(trainer, tokenizer, workdir, role, rank, setup, transport)
    if feed.turn is not None:
        feed.turn.give()


def _cpu_setup(cfg: RunConfig, rank: Rank) -> None:
    """A CPU trainer: its thread count, denormals flushed, freed memory kept for the next step."""
    import torch

    from sesa_graph.policy.local import keep_freed_memory

    torch.set_num_threads(cfg.train.trainer_threads)
    torch.set_flush_denormal(True)
    keep_freed_memory()
    if cfg.train.sharding == "fsdp2" and rank.world > 1 and rank.main:
        log.warning("train.sharding fsdp2: accelerate runs FSDP on GPUs only; these CPU ranks run DDP")


def _load_policy(cfg: RunConfig, pcfg: Any) -> tuple[Any, Any]:
    """The tokenizer and the policy model the trainer updates, its master weights in train.param_dtype."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sesa_graph.embedded import resolve_policy_model

    path = resolve_policy_model(pcfg.model if pcfg.backend == "local" else (pcfg.train_model or pcfg.model))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, cfg.train.param_dtype))
    return tokenizer, model


def _save_final(
    trainer: Any, tokenizer: Any, workdir: Path, role: str, rank: Rank, setup: Setup, transport: str
) -> None:
    """The final policy into policies/<role> (sent to the orchestrator's node when the link is remote), then
    the job's process group closed."""
    import torch

    cfg, link = setup.cfg, setup.link
    final = workdir / "policies" / role
    trainer.save_model(str(final))  # every rank: under FSDP2 the full state dict is gathered
    if rank.main:
        tokenizer.save_pretrained(str(final))
        # TRL's card says "a fine-tuned version of None" for a local base model
        write_model_card(cfg, role, workdir, cfg.train.steps, final, workdir / "checkpoints" / role)
        (final / ".complete").write_text("ok\n")
        log.info("done: %s", final)
    if link is not None:
        done = send_weights(
            link, "store" if transport == "store" else "file", f"final-{role}", cfg.train.steps, final
        )
        link.done({"policy": done})
    if rank.world > 1:
        # a rank that exits with its process group alive aborts in C++ at interpreter exit ("terminate called
        # without an active exception", seen once in a CI run) and the launcher then kills rank 0 mid-save
        trainer.accelerator.wait_for_everyone()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
