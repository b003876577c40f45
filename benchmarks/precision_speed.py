"""CPU speed of bf16 compute against float32, on the warm-up SFT and on the GRPO update phase, with the curves
of both side by side (issue 25). Weights and optimizer state are float32 in both; only the forward and backward
passes differ (bf16 autocast). Figures need an idle machine: another busy process on the cores slows one
dtype's steps and not the other's.

    .venv/bin/python benchmarks/precision_speed.py                       # SFT only (no --source)
    .venv/bin/python benchmarks/precision_speed.py --source runs/NAME    # SFT and the GRPO update phase
    .venv/bin/python benchmarks/precision_speed.py --parts grpo --source runs/NAME --grpo-steps 4 --roles solver

SFT (``--parts sft``): the real warm-up (``training.warmup.sft``: its synthetic grounded examples, its
``SFTTrainer`` and settings) for ``--sft-steps`` optimizer steps in each dtype, same data, seed and learning-rate
schedule (cosine over those steps), in this process. Prints s/step of each, the speedup and the per-step loss.

GRPO (``--parts grpo``): replays the recorded trajectories of a run (``--source``, any run with committed steps)
through the real trainer process, ``python -m training.trainer RUN_DIR --role R``, once per dtype and role. Each
replay gets a fresh run directory holding the source's ``config.yaml`` (with ``train.compute_dtype``, ``train.steps``
= ``--grpo-steps`` and ``train.report_to: none``), its trajectory shards and ``sync/committed-K.json`` markers; with
every step committed the trainer publishes its weights (``sync/ready-<role>-K.json``) and trains straight through.
The update of step K is ready(K+1) - ready(K): reading the shard, the old-policy log-probs, forward and backward
over the batch, the optimizer step, any checkpoint due and publishing the weights -- what ``sesa train`` counts as
its GRPO update phase (the last step has no next marker, so ``--grpo-steps`` N times N-1 updates). TRL's own
``step_time`` (the forward/backward passes alone) is shown too. Loss, grad norm, KL (logged only when
``train.beta`` > 0), the gap between the trainer's and the sampler's log-probs, and the reward come from the
trainer's ``trainer_state.json`` (its log lines when no checkpoint is left). The reward is the recorded one:
equal in both dtypes by construction. More steps than the source has reuse its shards in turn (off-policy
then, the same for both dtypes). By default the roles run one after the other, each with the config's
``train.trainer_threads``; ``--together`` runs them at once, as ``sesa train`` does.

A source run for a quick look (no `sesa warmup` needed; about 10 minutes on 2 cores):

    .venv/bin/sesa train --engine local --set train.steps=3 --set train.probe_every=0 \\
        --set solver_policy.model=embedded --set proposer_policy.model=embedded \\
        --set models.frozen.serve.model=embedded --name bench-src --runs-dir /tmp/bench-runs

Writes ``precision_speed.json`` and ``precision_speed.png`` (the curves side by side) under ``--out``
(default ``benchmarks/out/precision/``, git-ignored).
"""

from __future__ import annotations

import argparse
import ast
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DTYPES = ("float32", "bfloat16")
SHORT = {"float32": "fp32", "bfloat16": "bf16"}
# TRL GRPO log_history keys shown per step (those absent from a run are skipped)
GRPO_KEYS = (
    "loss",
    "kl",
    "grad_norm",
    "sampling/sampling_logp_difference/mean",
    "reward",
    "step_time",
)


def load_note() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    cores = os.cpu_count() or 1
    busy = (
        "" if one < 0.5 else f"  <- NOT IDLE: other work shares the {cores} cores; the timings are distorted"
    )
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {cores} cores{busy}"


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _fmt(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


# ---- SFT -----------------------------------------------------------------------------------------------------
def sft_part(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import TrainerCallback

    from training.warmup.sft import build_data, build_trainer

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    data = build_data(args.model, args.examples, seed=args.seed, distiller_examples=args.distiller_examples)
    print(
        f"SFT data: {len(data.rows)} examples, {data.tokens} tokens ({data.trained_tokens} trained) in "
        f"{time.perf_counter() - t0:.0f}s; {args.sft_steps} steps x {args.grad_accum} examples per dtype, "
        f"{args.threads} threads"
    )

    class StepTimer(TrainerCallback):
        """Wall and CPU time (all threads of this process) at each optimizer step's end."""

        def __init__(self) -> None:
            self.marks: list[tuple[float, float]] = []

        def on_train_begin(self, *a: Any, **k: Any) -> None:
            self.marks = [(time.perf_counter(), time.process_time())]

        def on_step_end(self, *a: Any, **k: Any) -> None:
            self.marks.append((time.perf_counter(), time.process_time()))

    out: dict[str, Any] = {"examples": len(data.rows), "tokens": data.tokens, "steps": args.sft_steps}
    with tempfile.TemporaryDirectory(prefix="precision-sft-") as tmp:
        for dtype in args.dtypes:
            timer = StepTimer()
            warm = build_trainer(
                data,
                Path(tmp) / dtype,
                compute_dtype=dtype,
                max_steps=args.sft_steps,
                seed=args.seed,
                grad_accum=args.grad_accum,
                callbacks=[timer],
            )
            print(f"  {dtype}: training ({load_note()})", flush=True)
            t = time.perf_counter()
            warm.trainer.train()
            wall = time.perf_counter() - t
            hist = [h for h in warm.trainer.state.log_history if "loss" in h]
            params = {str(p.dtype) for p in warm.trainer.model.parameters()}
            secs = [b[0] - a[0] for a, b in zip(timer.marks, timer.marks[1:], strict=False)]
            cpu = [b[1] - a[1] for a, b in zip(timer.marks, timer.marks[1:], strict=False)]
            out[dtype] = {
                "seconds_per_step": secs,
                "mean_s_per_step": _mean(secs),
                "mean_s_per_step_after_first": _mean(secs[1:]),
                "cpu_seconds_per_step": cpu,
                "mean_cpu_s_per_step": _mean(cpu),
                "mean_cpu_s_per_step_after_first": _mean(cpu[1:]),
                "train_seconds": wall,
                "loss": [h["loss"] for h in hist],
                "grad_norm": [h.get("grad_norm") for h in hist],
                "token_accuracy": [h.get("mean_token_accuracy") for h in hist],
                "param_dtypes": sorted(params),
                "mixed_precision": warm.trainer.accelerator.mixed_precision,
            }
            print(
                f"  {dtype}: {wall:.0f}s, {_fmt(out[dtype]['mean_s_per_step'], '.2f')} s/step; params "
                f"{', '.join(sorted(params))}; accelerate mixed_precision={out[dtype]['mixed_precision']}"
            )
            del warm
            gc.collect()
    return out


def print_sft(res: dict[str, Any], dtypes: list[str]) -> None:
    print(f"\n== warm-up SFT: {res['steps']} optimizer steps, {res['examples']} examples ==")
    gap = f"{SHORT[dtypes[-1]]}-{SHORT[dtypes[0]]}" if len(dtypes) > 1 else ""
    head = "step " + "".join(f"{SHORT[d] + ' loss':>11}" for d in dtypes) + f"{gap:>11}"
    head += "".join(f"{SHORT[d] + ' s':>9}" for d in dtypes)
    print(head + "".join(f"{SHORT[d] + ' CPU-s':>11}" for d in dtypes))

    def at(d: str, key: str, i: int) -> float | None:
        return res[d][key][i] if i < len(res[d][key]) else None

    for i, losses in enumerate(zip(*(res[d]["loss"] for d in dtypes), strict=False)):
        delta = losses[-1] - losses[0] if len(losses) > 1 else None
        line = f"{i + 1:>4} " + "".join(f"{x:>11.4f}" for x in losses) + f"{_fmt(delta, '+.4f'):>11}"
        line += "".join(f"{_fmt(at(d, 'seconds_per_step', i), '.2f'):>9}" for d in dtypes)
        print(line + "".join(f"{_fmt(at(d, 'cpu_seconds_per_step', i), '.2f'):>11}" for d in dtypes))
    speed(res, dtypes, "SFT")


def speed(res: dict[str, Any], dtypes: list[str], what: str) -> None:
    """Wall and CPU seconds a step of each dtype, the speedups (stored in ``res``) and the loss gap."""
    for key, unit, name in (
        ("mean_s_per_step", "s", "speedup"),
        ("mean_cpu_s_per_step", "CPU-s", "cpu_speedup"),
    ):
        if not all(res[d].get(key) for d in dtypes):
            continue
        for d in dtypes:
            print(
                f"{what} {SHORT[d]}: {_fmt(res[d][key], '.2f')} {unit}/step (after the first: "
                f"{_fmt(res[d][key + '_after_first'], '.2f')})"
            )
        if set(DTYPES) <= set(dtypes):
            fp32, bf16 = res["float32"], res["bfloat16"]
            res[name] = fp32[key] / bf16[key]
            later = key + "_after_first"
            res[name + "_after_first"] = fp32[later] / bf16[later] if fp32[later] and bf16[later] else None
            print(
                f"{what} {name.replace('_', ' ')} bf16 over fp32 ({unit}): {res[name]:.2f}x (after the first "
                f"step: {_fmt(res[name + '_after_first'], '.2f')}x)"
            )
    if set(DTYPES) <= set(dtypes):
        a, b = res["float32"].get("loss") or [], res["bfloat16"].get("loss") or []
        pairs = [(x, y) for x, y in zip(a, b, strict=False) if x is not None and y is not None]
        if pairs:
            gap = max(abs(x - y) for x, y in pairs)
            scale = statistics.fmean(abs(x) for x, _ in pairs)
            res["max_abs_loss_gap"], res["mean_abs_fp32_loss"] = gap, scale
            print(
                f"{what} loss, bf16 against fp32: largest gap {gap:.4g} (mean |fp32 loss| {scale:.4g}; "
                f"{100 * gap / max(scale, 1e-12):.1f}% of it)"
            )


# ---- GRPO ------------------------------------------------------------------------------------------------------
def source_steps(source: Path, roles: list[str]) -> list[int]:
    """The source run's committed steps that have a shard of every role."""
    from training.store import TrajectoryStore
    from training.sync import SyncDir

    store = TrajectoryStore(source)
    return [s for s in SyncDir(source).committed_steps() if all(store.exists(s, r) for r in roles)]


def replay_dir(args: argparse.Namespace, dtype: str, steps: list[int]) -> Path:
    """A fresh run directory whose trainer finds every step already committed."""
    import yaml

    from sesa_graph.config import load_config
    from training.store import TrajectoryStore

    run = args.out / "replay" / dtype
    shutil.rmtree(run, ignore_errors=True)
    (run / "sync").mkdir(parents=True)
    (run / "logs").mkdir()
    overrides = {
        **args.set,
        "train.compute_dtype": dtype,
        "train.steps": args.grpo_steps,
        "train.report_to": "none",
    }
    cfg = load_config(args.source / "config.yaml", overrides)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    src, dst = TrajectoryStore(args.source), TrajectoryStore(run)
    for k in range(args.grpo_steps):
        s = steps[k % len(steps)]
        for role in args.roles:
            dst.path(k, role).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src.path(s, role), dst.path(k, role))
        shutil.copyfile(args.source / "sync" / f"committed-{s}.json", run / "sync" / f"committed-{k}.json")
    return run


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process, all its threads (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_trainers(run: Path, roles: list[str], together: bool, steps: int) -> tuple[dict[str, int], dict]:
    """Run the roles' trainers; return their exit codes and, per role, the trainer's CPU seconds when each
    ``ready-<role>-K`` marker appeared (polled every 0.1 s)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SESA_ORCHESTRATOR_PID", "SESA_ORCHESTRATOR_START", "RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", SESA_TRAINER_LAUNCH="precision-bench")
    cpu_at: dict[str, dict[int, float]] = {role: {} for role in roles}

    def start(role: str) -> subprocess.Popen:
        log = (run / "logs" / f"{role}-trainer.log").open("ab")
        cmd = [sys.executable, "-m", "training.trainer", str(run), "--role", role]
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def watch(procs: dict[str, subprocess.Popen]) -> dict[str, int]:
        while True:
            for role, proc in procs.items():
                k = len(cpu_at[role])
                marker = run / "sync" / f"ready-{role}-{k}.json"
                if k < steps and marker.exists() and (cpu := cpu_seconds(proc.pid)) is not None:
                    cpu_at[role][k] = cpu
            if all(proc.poll() is not None for proc in procs.values()):
                return {role: proc.returncode for role, proc in procs.items()}
            time.sleep(0.1)

    codes: dict[str, int] = {}
    if together:
        codes = watch({role: start(role) for role in roles})
    else:
        for role in roles:
            codes.update(watch({role: start(role)}))
    return codes, cpu_at


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
    for dtype in args.dtypes:
        run = replay_dir(args, dtype, steps)
        print(f"  {dtype}: {run} ({load_note()})", flush=True)
        t = time.perf_counter()
        codes, cpu_at = run_trainers(run, args.roles, args.together, args.grpo_steps)
        wall = time.perf_counter() - t
        for role in args.roles:
            log_text = (run / "logs" / f"{role}-trainer.log").read_text(errors="replace")
            if codes[role] != 0:
                raise SystemExit(
                    f"the {role} trainer ({dtype}) exited {codes[role]}; see {run / 'logs' / f'{role}-trainer.log'}"
                )
            ready = {}
            for k in range(args.grpo_steps):
                f = run / "sync" / f"ready-{role}-{k}.json"
                if f.exists():
                    ready[k] = json.loads(f.read_text())["time"]
            secs = [
                ready[k + 1] - ready[k] for k in range(args.grpo_steps - 1) if k in ready and k + 1 in ready
            ]
            cpu = cpu_at[role]
            cpu_secs = [cpu[k + 1] - cpu[k] for k in range(args.grpo_steps - 1) if k in cpu and k + 1 in cpu]
            hist = log_history(run, role)
            said = (
                "bfloat16 compute"
                if "bfloat16 compute" in log_text
                else "float32 compute"
                if ("float32 compute" in log_text)
                else "not logged"
            )
            res = {
                "update_seconds": secs,
                "mean_s_per_step": _mean(secs),
                "mean_s_per_step_after_first": _mean(secs[1:]),
                "update_cpu_seconds": cpu_secs,
                "mean_cpu_s_per_step": _mean(cpu_secs),
                "mean_cpu_s_per_step_after_first": _mean(cpu_secs[1:]),
                "trainer_says": said,
                "saved_dtypes": saved_dtypes(run, role),
                "wall_seconds": wall,
                **{key: [h.get(key) for h in hist] for key in GRPO_KEYS},
            }
            out.setdefault(role, {})[dtype] = res
            print(
                f"  {dtype} {role}: {_fmt(res['mean_s_per_step'], '.1f')} s/update; trainer log: {said}; saved "
                f"policy {', '.join(res['saved_dtypes']) or '?'}"
            )
            if dtype == "bfloat16" and said != "bfloat16 compute":
                print(
                    f"  WARNING: the {role} trainer did not log 'bfloat16 compute': this training/trainer.py may not "
                    "read train.compute_dtype, so both replays may have computed in float32"
                )
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


def print_grpo(res: dict[str, Any], dtypes: list[str], roles: list[str]) -> None:
    for role in roles:
        r = res[role]
        print(f"\n== GRPO update phase, {role}: {res['steps']} steps replayed ==")
        keys = [k for k in GRPO_KEYS if any(x is not None for d in dtypes for x in r[d][k])]
        short = {
            "sampling/sampling_logp_difference/mean": "logp gap",
            "grad_norm": "grad norm",
            "step_time": "TRL s",
        }
        timed = {"update_seconds": "update s", "update_cpu_seconds": "update CPU-s"}
        cols = [(k, short.get(k, k), ".4g") for k in keys] + [(k, name, ".1f") for k, name in timed.items()]
        labels = [f"{SHORT[d]} {name}" for _, name, _ in cols for d in dtypes]
        widths = [max(12, len(label) + 2) for label in labels]
        print("step " + "".join(f"{label:>{w}}" for label, w in zip(labels, widths, strict=True)))
        for i in range(max(len(r[d]["loss"]) for d in dtypes)):
            vals = [r[d][k][i] if i < len(r[d][k]) else None for k, _, _ in cols for d in dtypes]
            specs = [spec for _, _, spec in cols for _ in dtypes]
            cells = zip(vals, specs, widths, strict=True)
            print(f"{i:>4} " + "".join(f"{_fmt(v, spec):>{w}}" for v, spec, w in cells))
        if "kl" not in keys:
            print(
                "(no KL: train.beta is 0, so TRL computes none; --set train.beta=0.01 adds the reference model)"
            )
        speed(r, dtypes, f"GRPO {role} update")
        for d in dtypes:
            st = [x for x in r[d]["step_time"] if x is not None]
            if st:
                r[d]["mean_trl_step_time"] = _mean(st)
                print(
                    f"GRPO {role} {SHORT[d]}: TRL step_time (forward/backward passes) {_mean(st):.1f} s/step"
                )


# ---- plot --------------------------------------------------------------------------------------------------
def plot(result: dict[str, Any], dtypes: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels: list[tuple[str, str, int, dict[str, list]]] = []  # title, y label, first step, series
    if "sft" in result:
        sft = result["sft"]
        panels.append(("SFT loss", "loss", 1, {d: sft[d]["loss"] for d in dtypes}))
        panels.append(("SFT grad norm", "grad norm", 1, {d: sft[d]["grad_norm"] for d in dtypes}))
        panels.append(("SFT s/step", "seconds", 1, {d: sft[d]["seconds_per_step"] for d in dtypes}))
        panels.append(
            ("SFT CPU s/step", "CPU seconds", 1, {d: sft[d]["cpu_seconds_per_step"] for d in dtypes})
        )
    for role in result.get("grpo", {}).get("roles", []):
        r = result["grpo"][role]
        for key, title in (
            ("loss", "loss"),
            ("kl", "KL"),
            ("grad_norm", "grad norm"),
            ("sampling/sampling_logp_difference/mean", "|logp train - logp sampler|"),
            ("reward", "reward (recorded)"),
            ("update_seconds", "update s/step"),
            ("update_cpu_seconds", "update CPU s/step"),
        ):
            series = {d: r[d][key] for d in dtypes}
            if any(x is not None for s in series.values() for x in s):
                panels.append((f"GRPO {role}: {title}", title, 0, series))
    if not panels:
        return
    cols = 3
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows), squeeze=False)
    for ax, (title, ylabel, first, series) in zip(axes.flat, panels, strict=False):
        for d, ys in series.items():
            pts = [(first + i, y) for i, y in enumerate(ys) if y is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", ms=3, label=SHORT[d])
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle("fp32 vs bf16 compute (fp32 weights) on CPU -- timings need an idle machine", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- main --------------------------------------------------------------------------------------------------
def main() -> None:
    from training.warmup.sft import DEFAULT_DISTILLER_EXAMPLES, DEFAULT_EXAMPLES, DEFAULT_GRAD_ACCUM

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--parts", default=None, help="sft, grpo or sft,grpo (default: sft, and grpo with --source)"
    )
    ap.add_argument("--dtypes", default="float32,bfloat16", help="compute dtypes, in the order they run")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "precision")
    ap.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("SFT")
    g.add_argument("--sft-steps", type=int, default=12, help="optimizer steps per dtype (the warm-up has 18)")
    g.add_argument("--model", default="embedded", help="base model of the warm-up")
    g.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES)
    g.add_argument("--distiller-examples", type=int, default=DEFAULT_DISTILLER_EXAMPLES)
    g.add_argument("--grad-accum", type=int, default=DEFAULT_GRAD_ACCUM)
    g.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: all cores)"
    )
    g = ap.add_argument_group("GRPO")
    g.add_argument("--source", type=Path, help="a run directory with committed steps (runs/NAME)")
    g.add_argument("--grpo-steps", type=int, default=0, help="steps to replay (default: the source's)")
    g.add_argument("--roles", default="solver,proposer")
    g.add_argument("--together", action="store_true", help="run both roles' trainers at once, as a run does")
    g.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override the replay's config"
    )
    g.add_argument("--keep", action="store_true", help="keep the replays' checkpoints and weights")
    args = ap.parse_args()

    parts = (args.parts or ("sft,grpo" if args.source else "sft")).split(",")
    args.dtypes = [d.strip() for d in args.dtypes.split(",")]
    args.roles = [r.strip() for r in args.roles.split(",")]
    if bad := set(args.dtypes) - set(DTYPES):
        ap.error(f"--dtypes: unknown {sorted(bad)}")
    if bad := set(parts) - {"sft", "grpo"}:
        ap.error(f"--parts: unknown {sorted(bad)}")
    if "grpo" in parts and args.source is None:
        ap.error("--parts grpo needs --source runs/NAME")
    if args.source is not None:
        args.source = args.source.resolve()
    from sesa_cli.common import parse_overrides
    from sesa_graph.precision import cpu_has_bf16_units, resolve_compute_dtype

    args.set = parse_overrides(args.set)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)

    print(
        "NOTE: timings need an idle machine; any other CPU work distorts them (and one dtype more than the other)."
    )
    print(
        f"CPU bf16 matrix units: {cpu_has_bf16_units()}; compute_dtype auto -> {resolve_compute_dtype('auto', 'cpu')}; "
        f"{load_note()}"
    )
    result: dict[str, Any] = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpu_bf16_units": cpu_has_bf16_units(),
        "load_before": os.getloadavg()[:2],
        "dtypes": args.dtypes,
    }
    if "sft" in parts:
        result["sft"] = sft_part(args)
        print_sft(result["sft"], args.dtypes)
    if "grpo" in parts:
        result["grpo"] = grpo_part(args)
        result["grpo"]["roles"] = args.roles
        print_grpo(result["grpo"], args.dtypes, args.roles)
    result["load_after"] = os.getloadavg()[:2]
    print(f"\n{load_note()}")
    (args.out / "precision_speed.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.dtypes, args.out / "precision_speed.png")
    print(f"wrote {args.out / 'precision_speed.json'} and {args.out / 'precision_speed.png'}")


if __name__ == "__main__":
    main()
