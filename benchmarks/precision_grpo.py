"""The GRPO half of benchmarks/precision_speed.py: replay a run's recorded trajectories through the real trainer
job once per variant and role, against a coordinator hosted here with every step already committed, and read
back its timings and curves (see that script's --help)."""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from precision_common import (
    GRPO_KEYS,
    ROOT,
    VARIANTS,
    compare,
    fmt,
    load_note,
    series_at,
    share_note,
    timing,
)


def source_steps(source: Path, roles: list[str]) -> list[int]:
    """The source run's committed steps that have a shard of every role."""
    from training.store import TrajectoryStore
    from training.sync import SyncDir

    store = TrajectoryStore(source)
    return [s for s in SyncDir(source).committed_steps() if all(store.exists(s, r) for r in roles)]


def replay_dir(args: argparse.Namespace, label: str, steps: list[int]) -> Path:
    """A fresh run directory with the variant's config, the replayed steps' shards and their commit records
    (step K replays source step ``steps[K % len(steps)]``)."""
    import yaml

    from sesa_graph.config import load_config
    from training.store import TrajectoryStore
    from training.sync import SyncDir

    run = args.out / "replay" / label.replace("/", "-")
    dtype, trained_only = VARIANTS[label]
    shutil.rmtree(run, ignore_errors=True)
    (run / "logs").mkdir(parents=True)
    overrides = {
        **args.set,
        "train.compute_dtype": dtype,
        "train.score_trained_positions_only": trained_only,
        "train.steps": args.grpo_steps,
        "train.report_to": "none",
    }
    cfg = load_config(args.source / "config.yaml", overrides)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    src, dst, record = TrajectoryStore(args.source), TrajectoryStore(run), SyncDir(run)
    for k in range(args.grpo_steps):
        s = steps[k % len(steps)]
        for role in args.roles:
            dst.path(k, role).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src.path(s, role), dst.path(k, role))
        record.commit(k, SyncDir(args.source).committed(s))
    return run


def host_coordinator(run: Path, roles: list[str]) -> Any:
    """The orchestrator's side of the barrier for the replay, every step committed up front so the trainer
    trains straight through: it never waits for a rollout, and each update is timed alone."""
    from sesa_graph.config import load_config
    from training.coordinator import Coordinator
    from training.store import TrajectoryStore
    from training.sync import SyncDir

    cfg = load_config(run / "config.yaml")
    # the source run's cluster settings (heartbeats, timeouts, weight transport), on a free loopback port:
    # the replay's trainers run on this machine, and a fixed port could be taken by a run in progress
    cluster = cfg.cluster.model_copy(update={"coordinator_host": "127.0.0.1", "coordinator_port": None})
    coord = Coordinator(cluster, (run / "config.yaml").read_text(), {"run": str(run), "replay": True})
    store, record = TrajectoryStore(run), SyncDir(run)
    for k in record.committed_steps():
        coord.commit(k, {role: store.path(k, role).read_bytes() for role in roles}, record.committed(k))
    return coord


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and all its live descendants (a trainer job: its launcher and every
    rank, all their threads); None once it is gone. A launcher's ranks must be counted themselves: /proc
    credits a child's time to its parent only after it exits, and torchrun's agent puts its ranks in sessions
    of their own."""
    stats: dict[int, tuple[int, float]] = {}  # pid: (parent, cpu ticks)
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            stats[int(proc.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    if pid not in stats:
        return None
    tree, grew = {pid}, True
    while grew:  # parents before children whatever the pid order (pids wrap)
        grew = False
        for child, (parent, _) in stats.items():
            if child not in tree and parent in tree:
                tree.add(child)
                grew = True
    total = sum(stats[p][1] for p in tree)
    return total / os.sysconf("SC_CLK_TCK")


def run_trainers(
    run: Path, roles: list[str], together: bool, steps: int
) -> tuple[dict[str, int], dict[str, dict[int, float]], dict[str, dict[int, float]]]:
    """Run the roles' trainer jobs against a coordinator hosted here; return their exit codes and, per role
    and step K, when ``ready/<role>/K`` first appeared (seconds on this process's clock, polled every 0.1 s)
    and the job's CPU seconds then."""
    from sesa_graph.config import load_config
    from sesa_graph.weights_wire import drop
    from training.trainer_jobs import trainer_command

    cfg = load_config(run / "config.yaml")
    coord = host_coordinator(run, roles)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SESA_ORCHESTRATOR_PID", "SESA_ORCHESTRATOR_START", "RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        TRL_EXPERIMENTAL_SILENCE="1",
    )
    ready_at: dict[str, dict[int, float]] = {role: {} for role in roles}
    cpu_at: dict[str, dict[int, float]] = {role: {} for role in roles}

    def start(role: str) -> subprocess.Popen:
        log = (run / "logs" / f"{role}-trainer.log").open("ab")
        cmd = trainer_command(cfg, run, role, coord.address)  # the launcher and ranks sesa train would use
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def watch(procs: dict[str, subprocess.Popen]) -> dict[str, int]:
        while True:
            for role, proc in procs.items():
                k = len(ready_at[role])
                if k < steps and (msg := coord.ready(role, k)) is not None:
                    ready_at[role][k] = time.monotonic()
                    if (cpu := cpu_seconds(proc.pid)) is not None:
                        cpu_at[role][k] = cpu
                    if msg["weights"].get("kind") == "store":  # nobody loads them: free the store's copy
                        drop(coord.store, msg["weights"]["prefix"])
            if all(proc.poll() is not None for proc in procs.values()):
                return {role: proc.returncode for role, proc in procs.items()}
            time.sleep(0.1)

    codes: dict[str, int] = {}
    try:
        if together:
            codes = watch({role: start(role) for role in roles})
        else:
            for role in roles:
                codes.update(watch({role: start(role)}))
    finally:
        coord.stop("the precision benchmark ended")  # a job still running (Ctrl-C) stops at once
        coord.close()
    return codes, ready_at, cpu_at


def log_history(run: Path, role: str) -> list[dict[str, Any]]:
    """Per-step TRL metrics: the newest checkpoint's trainer_state.json, else the dicts in the trainer's log."""
    ckpts = sorted(
        (run / "checkpoints" / role).glob("checkpoint-*/trainer_state.json"),
        key=lambda p: int(p.parent.name.split("-")[1]),
    )
    if ckpts:
        hist = json.loads(ckpts[-1].read_text()).get("log_history", [])
        return [h for h in hist if "loss" in h]
    out = []
    log = run / "logs" / f"{role}-trainer.log"
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if line.startswith("{") and "'loss'" in line:
            try:
                row = ast.literal_eval(line)
            except (ValueError, SyntaxError):
                continue
            out.append({k: _num(v) for k, v in row.items()})
    return out


def _num(v: Any) -> Any:
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def saved_dtypes(run: Path, role: str) -> list[str]:
    from safetensors import safe_open

    f = run / "policies" / role / "model.safetensors"
    if not f.exists():
        return []
    with safe_open(str(f), "pt") as st:
        return sorted({str(st.get_slice(k).get_dtype()) for k in st.keys()})  # noqa: SIM118 - not a dict


def grpo_part(args: argparse.Namespace) -> dict[str, Any]:
    from sesa_graph.config import load_config

    steps = source_steps(args.source, args.roles)
    if not steps:
        raise SystemExit(f"{args.source}: no committed step with {' and '.join(args.roles)} trajectories")
    args.grpo_steps = args.grpo_steps or len(steps)
    if args.grpo_steps < 2:
        raise SystemExit("--grpo-steps must be >= 2: the update of step K is ready(K+1) - ready(K)")
    print(
        f"\nGRPO replay of {args.source} (committed steps {steps}) for {args.grpo_steps} steps, roles "
        f"{', '.join(args.roles)} ({'at once' if args.together else 'one after the other'})"
    )
    out: dict[str, Any] = {"source": str(args.source), "source_steps": steps, "steps": args.grpo_steps}
    for label in args.grpo_variants:
        dtype, trained_only = VARIANTS[label]
        run = replay_dir(args, label, steps)
        cfg = load_config(run / "config.yaml")
        print(f"  {label}: {run} ({load_note()})", flush=True)
        codes, ready, cpu_at = run_trainers(run, args.roles, args.together, args.grpo_steps)
        for role in args.roles:
            log_file = run / "logs" / f"{role}-trainer.log"
            if codes[role] != 0:
                raise SystemExit(f"the {role} trainer ({label}) exited {codes[role]}; see {log_file}")
            log_text = log_file.read_text(errors="replace")
            n = args.grpo_steps - 1
            at = ready[role]
            wall = [at[k + 1] - at[k] for k in range(n) if {k, k + 1} <= set(at)]
            cpu = [cpu_at[role][k + 1] - cpu_at[role][k] for k in range(n) if {k, k + 1} <= set(cpu_at[role])]
            threads = cfg.train.trainer_threads * cfg.train.ranks(role)  # every rank's threads are timed
            said = next((f"{d} compute" for d in ("bfloat16", "float32") if f"{d} compute" in log_text), "?")
            hist = log_history(run, role)
            res = {
                "compute_dtype": dtype,
                "score_trained_only": trained_only,
                **timing(wall, cpu),
                "trainer_says": said,
                "trained_positions_only": "trained positions only: True" in log_text,
                "saved_dtypes": saved_dtypes(run, role),
                "cpu_share": share_note(wall, cpu, threads),
                **{key: [h.get(key) for h in hist] for key in GRPO_KEYS},
            }
            out.setdefault(role, {})[label] = res
            print(
                f"  {label} {role}: {fmt(res['mean_s'], '.1f')} s/update; trainer log: {said}; saved policy "
                f"{', '.join(res['saved_dtypes']) or '?'}; {res['cpu_share']}"
            )
            if said != f"{dtype} compute":
                print(
                    f"  WARNING: the {role} trainer did not log '{dtype} compute': this training/trainer.py may not "
                    "read train.compute_dtype"
                )
            if trained_only and not res["trained_positions_only"]:
                print("  WARNING: this TRL's fused LM head could not be limited to the trained positions")
        if not args.keep:  # weights, optimizer state and published copies: ~2 GB a role
            for role in args.roles:
                states = sorted(
                    (run / "checkpoints" / role).glob("checkpoint-*/trainer_state.json"),
                    key=lambda p: int(p.parent.name.split("-")[1]),
                )
                if states:  # the metrics stay readable
                    shutil.copyfile(states[-1], run / "logs" / f"{role}-trainer_state.json")
            for sub in ("checkpoints", "policies", "sync/weights"):
                shutil.rmtree(run / sub, ignore_errors=True)
    return out


def print_grpo(res: dict[str, Any], labels: list[str], roles: list[str]) -> None:
    short = {
        "sampling/sampling_logp_difference/mean": "logp gap",
        "grad_norm": "grad norm",
        "step_time": "TRL s",
    }
    for role in roles:
        r = res[role]
        print(
            f"\n== GRPO update phase, {role}: {res['steps']} steps replayed (update K = ready K+1 - ready K; "
            "TRL s = its step_time, the passes alone; logp gap = |trainer - sampler| log-prob) =="
        )
        keys = [k for k in GRPO_KEYS if any(x is not None for label in labels for x in r[label][k])]
        cols = [(k, short.get(k, k), ".4g") for k in keys]
        cols += [("seconds", "update s", ".1f"), ("cpu_seconds", "update CPU-s", ".1f")]
        heads = [f"{label} {name}" for _, name, _ in cols for label in labels]
        widths = [max(10, len(h) + 2) for h in heads]
        print("step" + "".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True)))
        for i in range(max(len(r[label]["loss"]) for label in labels)):
            cells = [(series_at(r, label, key, i), spec) for key, _, spec in cols for label in labels]
            print(
                f"{i:>4}"
                + "".join(f"{fmt(v, spec):>{w}}" for (v, spec), w in zip(cells, widths, strict=True))
            )
        if "kl" not in keys:
            print(
                "(no KL: train.beta is 0, so TRL computes none; --set train.beta=0.01 adds the reference model)"
            )
        compare(r, labels, f"GRPO {role} update")


# ---- plot --------------------------------------------------------------------------------------------------
