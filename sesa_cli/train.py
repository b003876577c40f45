"""`sesa train`: self-play training on a run config."""

from __future__ import annotations

from pathlib import Path

import typer

from sesa_cli.common import ENGINE_HELP, check_engine, parse_overrides, setup_logging


def train(
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="YAML run config (default: configs/tiny-cpu.yaml, the embedded CPU default).",
    ),
    resume: Path | None = typer.Option(
        None,
        "--resume",
        help="Continue runs/NAME from its first uncommitted step. --steps extends it (a finished run too); "
        "other flags are applied when safe (timeouts, URLs, GPUs, logging) or refused with the reason. A run "
        "another process owns is refused, naming it; so is a config.yaml edited by hand (use --set).",
    ),
    name: str | None = typer.Option(None, help="Run name (outputs in runs/<name>/)."),
    steps: int | None = typer.Option(None, help="Number of self-play steps."),
    bank: str | None = typer.Option(
        None,
        help="Skill memory: on (SESA) | off (no bank; with --proposer-reward 1-p the SSP-style arm) | static "
        "(seeds + priming, no distillation: the paper's 'w/o failure distillation') | placebo (unrelated skills "
        "of the same length).",
    ),
    no_priming: bool = typer.Option(
        False,
        "--no-priming",
        help="Start from an empty bank: no seed skills, no priming files (the paper's 'w/o priming').",
    ),
    proposer_reward: str | None = typer.Option(
        None,
        help="frontier (SESA) | 1-p (SSP's adversarial reward; the paper's 'w/o frontier shaping') | "
        "intermediate (ours: 1 on the frontier, else 0).",
    ),
    report_to: str | None = typer.Option(None, help="Passed to TRL: none, tensorboard, trackio, wandb."),
    engine: str | None = typer.Option(None, help=ENGINE_HELP + ". Default: the config's *_policy.backend."),
    set_: list[str] = typer.Option([], "--set", help="Override any config field: --set solver.max_turns=4."),
    runs_dir: Path | None = typer.Option(
        None, help="Where run directories go (default: runs, below the working directory)."
    ),
    verbose: bool = typer.Option(False, "-v", help="Log at INFO level."),
) -> None:
    """Self-play training: proposer + solver GRPO (TRL) with the skill bank, on the config's policies.

    With no arguments: the embedded default on CPU (SmolLM2-135M format-warmed, BM25 over the embedded
    Wikipedia summaries, MiniLM skill memory, Qwen2.5-Coder-1.5B on llama.cpp judging and distilling), a few
    steps with a scaled-down consolidation cadence.

    Memory: a CPU run first adds up each process's estimated peak and refuses, naming the knobs, when this
    machine (or its cgroup) has less free (--set train.memory_check=false starts anyway). Disk: a finished
    default run keeps about 4 GiB: checkpoints/ (the last one per role, model and optimizer state, so
    --resume --steps N can extend it) and policies/ (the final weights). `sesa runs` lists each run's size
    and how its last attempt ended; `sesa runs --prune NAME` removes a finished run's checkpoints (about 3 GiB)
    once you will not extend it.
    """
    from sesa_cli.common import print_settings
    from sesa_graph.config import resolve_config
    from training.launch import train as run_train

    setup_logging(verbose)
    ov, flags = _flag_overrides(
        parse_overrides(set_), name, steps, bank, report_to, proposer_reward, no_priming, engine
    )
    cfg, settings = None, None
    if resume is None:
        cfg, rows = resolve_config(config, ov, flags)
        # into the run directory (settings.txt), not the log: they were 288 of a batch log's 362 lines
        lines = ["# resolved settings (where each comes from; [paper]/[SSP]: the reference's value)"]
        print_settings(rows, echo=lines.append)
        settings = "\n".join(lines) + "\n"
    else:
        ov, flags = _resume_overrides(resume, config, runs_dir, ov, flags)
    from training.launch import TrainingStopped

    try:
        run_train(
            cfg,
            runs_dir=runs_dir or Path("runs"),
            resume=resume,
            overrides=ov,
            flags=flags,
            settings=settings,
        )
    except TrainingStopped as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _flag_overrides(
    ov: dict,
    name: str | None,
    steps: int | None,
    bank: str | None,
    report_to: str | None,
    proposer_reward: str | None,
    no_priming: bool,
    engine: str | None,
) -> tuple[dict, dict[str, str]]:
    """The config overrides the switches of `sesa train` make, on top of --set's (``ov``), and the flag that
    made each (what the settings table says the value came from)."""
    flags: dict[str, str] = {}
    for key, val, flag in (
        ("name", name, "--name"),
        ("train.steps", steps, "--steps"),
        ("memory.mode", bank, "--bank"),
        ("train.report_to", report_to, "--report-to"),
    ):
        if val is not None:
            ov[key], flags[key] = val, flag
    if proposer_reward is not None:
        ov["rewards.proposer"] = {"1-p": "one_minus_p"}.get(proposer_reward, proposer_reward)
        flags["rewards.proposer"] = "--proposer-reward"
    if no_priming:
        ov["memory.priming_files"], ov["memory.use_seeds"] = [], False
        flags.update({"memory.priming_files": "--no-priming", "memory.use_seeds": "--no-priming"})
    if engine is not None:
        for key in ("solver_policy.backend", "proposer_policy.backend"):
            ov[key], flags[key] = check_engine(engine), "--engine"
    return ov, flags


def _resume_overrides(
    resume: Path, config: Path | None, runs_dir: Path | None, ov: dict, flags: dict[str, str]
) -> tuple[dict, dict[str, str]]:
    """The settings given with --resume, each named by its flag; ``--config`` counts as every key of the
    file (those equal to the run's stored values change nothing)."""
    from sesa_graph.config import load_config
    from sesa_graph.reference_values import flatten
    from training.resume import ResumeError

    if runs_dir is not None:
        raise ResumeError(
            f"--runs-dir cannot be given with --resume: the run directory is the --resume path ({resume})"
        )
    if config is None:
        return ov, flags
    from_file = flatten(load_config(config).model_dump(mode="json"))
    return {**from_file, **ov}, {**{k: f"--config {config} ({k})" for k in from_file}, **flags}


def trainers(
    coordinator: str = typer.Option(
        ...,
        "--coordinator",
        help="HOST:PORT of the run's coordinator: cluster.coordinator_host and coordinator_port of the config "
        "`sesa train` runs (it prints the address when it starts).",
    ),
    node_rank: int | None = typer.Option(
        None,
        "--node-rank",
        help="This node among the trainer nodes, 0..cluster.trainer_nodes-1 (default $NODE_RANK).",
    ),
    workdir: Path = typer.Option(
        Path("trainer-work"),
        "--workdir",
        help="This node's folder for the jobs: checkpoints/, policies/, logs/. Keep it for --resume.",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="This node's copy of the run config, checked against the orchestrator's (differences are named).",
    ),
    main_address: str | None = typer.Option(
        None,
        "--main-address",
        help="The trainer jobs' rendezvous host, the first trainer node (default: cluster.main_address, else "
        "$MASTER_ADDR, else 127.0.0.1).",
    ),
    verbose: bool = typer.Option(False, "-v", help="Log at INFO level."),
) -> None:
    """Run this node's share of both trainer jobs of a run whose orchestrator (`sesa train` with
    cluster.trainers: external) runs elsewhere. One command per trainer node; stop it with Ctrl-C."""
    from training.trainer_node import run_node

    setup_logging(verbose)
    rc = run_node(coordinator, workdir, node_rank, config, main_address, say=typer.echo)
    if rc:
        raise typer.Exit(rc)
