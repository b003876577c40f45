"""CPU speed of bf16 compute against float32, on the warm-up SFT and on the GRPO update phase, with the curves
of both side by side (issue 25). Weights and optimizer state are float32 in every variant; only the forward and
backward passes differ (bf16 autocast). FIGURES NEED AN IDLE MACHINE: another busy process on the cores slows
one variant's steps and not another's. Each variant's "cores busy" (its CPU seconds per wall second) says
whether it had its threads' cores to itself.

    .venv/bin/python benchmarks/precision_speed.py                       # SFT only (no --source)
    .venv/bin/python benchmarks/precision_speed.py --source runs/NAME    # SFT and the GRPO update phase
    .venv/bin/python benchmarks/precision_speed.py --parts grpo --source runs/NAME --grpo-steps 4 \\
        --grpo-variants fp32/all,bf16/all,bf16/trained --roles solver

Variants: fp32 | bf16 compute, and /all | /trained: whether TRL's fused LM head scores every position (TRL's
default off CUDA) or only the trained ones (``training.warmup.sft.trained_positions_only``, same values on the
trained positions). The first variant is the baseline of the speedups.

SFT (``--parts sft``): the real warm-up (``training.warmup.sft``: its synthetic grounded examples, its
``SFTTrainer`` and settings) for ``--sft-steps`` optimizer steps per variant, same data, seed and learning-rate
schedule (cosine over those steps), in this process. Default variants: fp32/all (the warm-up before issue 25),
fp32/trained, bf16/trained (``sesa warmup`` now, on a CPU with bf16 units). Prints s/step and CPU-s/step of each,
the speedups and the per-step loss.

GRPO (``--parts grpo``): replays the recorded trajectories of a run (``--source``, any run with committed steps)
through the real trainer process, ``python -m training.trainer RUN_DIR --role R``, once per variant and role.
Each replay gets a fresh run directory holding the source's ``config.yaml`` (with ``train.compute_dtype``,
``train.steps`` = ``--grpo-steps`` and ``train.report_to: none``), its trajectory shards and
``sync/committed-K.json`` markers; with every step committed the trainer publishes its weights
(``sync/ready-<role>-K.json``) and trains straight through. The update of step K is ready(K+1) - ready(K):
reading the shard, the log-prob passes, forward and backward over the batch, the optimizer step, any checkpoint
due and publishing the weights -- what ``sesa train`` counts as its GRPO update phase (the last step has no next
marker, so N steps time N-1 updates). Loss, grad norm, KL (logged only when ``train.beta`` > 0), the gap between
the trainer's and the sampler's log-probs, TRL's ``step_time`` and the reward come from the trainer's
``trainer_state.json`` (its log lines when no checkpoint is left). The reward is the recorded one: equal in every
variant by construction. More steps than the source has reuse its shards in turn (off-policy then, alike for
every variant). By default the roles run one after the other, each with the config's ``train.trainer_threads``;
``--together`` runs them at once, as ``sesa train`` does.

A source run for a quick look (3 steps, about 14 minutes on 2 cores; its trajectories need the format-warmed
policy to have reward variance -- the base model's rewards were all 0 / -1, which gives zero losses and
gradients to compare):

    .venv/bin/sesa warmup
    .venv/bin/sesa train --engine local --set train.steps=3 --set train.probe_every=0 \\
        --name bench-src --runs-dir /tmp/bench-runs

Writes ``precision_speed.json`` and ``precision_speed.png`` (the curves side by side) under ``--out``
(default ``benchmarks/out/precision/``, git-ignored).
"""

from __future__ import annotations

import argparse
import ast
import gc
import itertools
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

VARIANTS = {  # label: (compute dtype, score only the trained positions)
    "fp32/all": ("float32", False),
    "fp32/trained": ("float32", True),
    "bf16/all": ("bfloat16", False),
    "bf16/trained": ("bfloat16", True),
}
# TRL GRPO log_history keys shown per step (those absent from a run are skipped)
GRPO_KEYS = (
    "loss",
    "kl",
    "grad_norm",
    "sampling/sampling_logp_difference/mean",
    "reward",
    "step_time",
)
# A trainer that scores only its trained positions (what the warm-up does, see trained_positions_only): the
# real entry point, run inside the context manager
TRAINED_ONLY_TRAINER = (
    "import runpy, sys\n"
    "from training.warmup.sft import trained_positions_only\n"
    "sys.argv = ['training.trainer', *sys.argv[1:]]\n"
    "with trained_positions_only() as patched:\n"
    "    print('trained positions only:', patched, flush=True)\n"
    "    runpy.run_module('training.trainer', run_name='__main__', alter_sys=True)\n"
)


def load_note() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def share_note(wall: list[float], cpu: list[float], threads: int) -> str:
    """CPU seconds per wall second of the timed process: about its thread count on an idle machine."""
    if not wall or not cpu or sum(wall) <= 0:
        return ""
    share = sum(cpu) / sum(wall)
    busy = "" if share >= 0.85 * threads else "  <- other work took cores: these timings are distorted"
    return f"{share:.2f} cores busy of {threads} thread(s){busy}"


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _fmt(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def _series(res: dict[str, Any], label: str, key: str, i: int) -> Any:
    xs = res[label].get(key) or []
    return xs[i] if i < len(xs) else None


def timing(wall: list[float], cpu: list[float]) -> dict[str, Any]:
    return {
        "seconds": wall,
        "mean_s": _mean(wall),
        "mean_s_after_first": _mean(wall[1:]),
        "cpu_seconds": cpu,
        "mean_cpu_s": _mean(cpu),
        "mean_cpu_s_after_first": _mean(cpu[1:]),
    }


def compare(res: dict[str, Any], labels: list[str], what: str) -> None:
    """Each variant's wall and CPU seconds a step; every variant's speedup over the first (stored in
    ``res['speedups']``) and its largest loss and grad-norm gaps to it. (A GRPO loss is about 0 whatever the
    dtype: at the first pass the ratio is 1 and the group's advantages sum to 0; its grad norm is what differs.)"""
    for label in labels:
        r = res[label]
        print(
            f"{what} {label:>12}: {_fmt(r['mean_s'], '.2f')} s/step ({_fmt(r['mean_s_after_first'], '.2f')} after "
            f"the first), {_fmt(r['mean_cpu_s'], '.2f')} CPU-s/step"
        )
    base = labels[0]
    res["speedups"] = {}
    for label in labels[1:]:
        b, r = res[base], res[label]
        sp = {
            key: b[key] / r[key] if b.get(key) and r.get(key) else None
            for key in ("mean_s", "mean_s_after_first", "mean_cpu_s")
        }
        gaps = []
        for key in ("loss", "grad_norm"):
            pairs = [(x, y) for x, y in zip(b[key], r[key], strict=False) if x is not None and y is not None]
            if pairs:
                gap, scale = max(abs(x - y) for x, y in pairs), statistics.fmean(abs(x) for x, _ in pairs)
                sp[f"max_abs_{key}_gap"], sp[f"mean_abs_base_{key}"] = gap, scale
                gaps.append(f"{key}: largest gap {gap:.3g} (mean |{base}| {scale:.3g})")
        res["speedups"][f"{label} over {base}"] = sp
        gap = "; " + ", ".join(gaps) if gaps else ""
        print(
            f"{what} speedup of {label} over {base}: {_fmt(sp['mean_s'], '.2f')}x wall "
            f"({_fmt(sp['mean_s_after_first'], '.2f')}x after the first step), {_fmt(sp['mean_cpu_s'], '.2f')}x CPU"
            + gap
        )


# ---- SFT -----------------------------------------------------------------------------------------------------
def sft_part(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import TrainerCallback

    from training.warmup.sft import build_data, build_trainer

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    data = build_data(args.model, args.examples, seed=args.seed, distiller_examples=args.distiller_examples)
    print(
        f"\nSFT data: {len(data.rows)} examples, {data.tokens} tokens ({data.trained_tokens} trained) in "
        f"{time.perf_counter() - t0:.0f}s; {args.sft_steps} steps x {args.grad_accum} examples per variant, "
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

    out: dict[str, Any] = {
        "examples": len(data.rows),
        "tokens": data.tokens,
        "trained_tokens": data.trained_tokens,
        "steps": args.sft_steps,
        "threads": args.threads,
    }
    with tempfile.TemporaryDirectory(prefix="precision-sft-") as tmp:
        for label in args.sft_variants:
            dtype, trained_only = VARIANTS[label]
            timer = StepTimer()
            warm = build_trainer(
                data,
                Path(tmp) / dtype,
                compute_dtype=dtype,
                max_steps=args.sft_steps,
                seed=args.seed,
                grad_accum=args.grad_accum,
                callbacks=[timer],
                score_trained_only=trained_only,
            )
            print(f"  {label}: training ({load_note()})", flush=True)
            warm.train()
            marks = timer.marks
            wall = [b[0] - a[0] for a, b in itertools.pairwise(marks)]
            cpu = [b[1] - a[1] for a, b in itertools.pairwise(marks)]
            hist = [h for h in warm.trainer.state.log_history if "loss" in h]
            out[label] = {
                "compute_dtype": dtype,
                "score_trained_only": trained_only,
                **timing(wall, cpu),
                "loss": [h["loss"] for h in hist],
                "grad_norm": [h.get("grad_norm") for h in hist],
                "token_accuracy": [h.get("mean_token_accuracy") for h in hist],
                "param_dtypes": sorted({str(p.dtype) for p in warm.trainer.model.parameters()}),
                "mixed_precision": warm.trainer.accelerator.mixed_precision,
                "cpu_share": share_note(wall, cpu, args.threads),
            }
            r = out[label]
            print(
                f"  {label}: {sum(wall):.0f}s, {_fmt(r['mean_s'], '.2f')} s/step; params "
                f"{', '.join(r['param_dtypes'])}; accelerate mixed_precision={r['mixed_precision']}; "
                f"{r['cpu_share']}"
            )
            del warm
            gc.collect()
    return out


def print_sft(res: dict[str, Any], labels: list[str]) -> None:
    print(
        f"\n== warm-up SFT: {res['steps']} optimizer steps, {res['examples']} examples, {res['threads']} threads "
        "(/all: TRL scores every position; /trained: only the trained ones, as sesa warmup now does) =="
    )
    cols = [("loss", "loss", ".4f"), ("seconds", "s", ".2f"), ("cpu_seconds", "CPU-s", ".2f")]
    heads = [f"{label} {name}" for _, name, _ in cols for label in labels]
    widths = [max(10, len(h) + 2) for h in heads]
    print("step" + "".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True)))
    for i in range(max(len(res[label]["loss"]) for label in labels)):
        cells = [(_series(res, label, key, i), spec) for key, _, spec in cols for label in labels]
        print(
            f"{i + 1:>4}"
            + "".join(f"{_fmt(v, spec):>{w}}" for (v, spec), w in zip(cells, widths, strict=True))
        )
    compare(res, labels, "SFT")


# ---- GRPO ------------------------------------------------------------------------------------------------------
def source_steps(source: Path, roles: list[str]) -> list[int]:
    """The source run's committed steps that have a shard of every role."""
    from training.store import TrajectoryStore
    from training.sync import SyncDir

    store = TrajectoryStore(source)
    return [s for s in SyncDir(source).committed_steps() if all(store.exists(s, r) for r in roles)]


def replay_dir(args: argparse.Namespace, label: str, steps: list[int]) -> Path:
    """A fresh run directory whose trainer finds every step already committed."""
    import yaml

    from sesa_graph.config import load_config
    from training.store import TrajectoryStore

    run = args.out / "replay" / label.replace("/", "-")
    dtype = VARIANTS[label][0]
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


def run_trainers(
    run: Path, roles: list[str], together: bool, steps: int, trained_only: bool
) -> tuple[dict[str, int], dict]:
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
        entry = ["-c", TRAINED_ONLY_TRAINER] if trained_only else ["-m", "training.trainer"]
        cmd = [sys.executable, *entry, str(run), "--role", role]
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
    import yaml

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
        threads = yaml.safe_load((run / "config.yaml").read_text())["train"]["trainer_threads"]
        print(f"  {label}: {run} ({load_note()})", flush=True)
        codes, cpu_at = run_trainers(run, args.roles, args.together, args.grpo_steps, trained_only)
        for role in args.roles:
            log_file = run / "logs" / f"{role}-trainer.log"
            if codes[role] != 0:
                raise SystemExit(f"the {role} trainer ({label}) exited {codes[role]}; see {log_file}")
            log_text = log_file.read_text(errors="replace")
            ready = {}
            for k in range(args.grpo_steps):
                f = run / "sync" / f"ready-{role}-{k}.json"
                if f.exists():
                    ready[k] = json.loads(f.read_text())["time"]
            n = args.grpo_steps - 1
            wall = [ready[k + 1] - ready[k] for k in range(n) if k in ready and k + 1 in ready]
            cpu = [cpu_at[role][k + 1] - cpu_at[role][k] for k in range(n) if {k, k + 1} <= set(cpu_at[role])]
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
                f"  {label} {role}: {_fmt(res['mean_s'], '.1f')} s/update; trainer log: {said}; saved policy "
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
            cells = [(_series(r, label, key, i), spec) for key, _, spec in cols for label in labels]
            print(
                f"{i:>4}"
                + "".join(f"{_fmt(v, spec):>{w}}" for (v, spec), w in zip(cells, widths, strict=True))
            )
        if "kl" not in keys:
            print(
                "(no KL: train.beta is 0, so TRL computes none; --set train.beta=0.01 adds the reference model)"
            )
        compare(r, labels, f"GRPO {role} update")


# ---- plot --------------------------------------------------------------------------------------------------
def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels: list[tuple[str, str, int, dict[str, list]]] = []  # title, y label, first step, series by variant
    if "sft" in result:
        sft, labels = result["sft"], result["sft_variants"]
        for key, title in (
            ("loss", "loss"),
            ("grad_norm", "grad norm"),
            ("seconds", "s/step"),
            ("cpu_seconds", "CPU s/step"),
        ):
            panels.append((f"SFT: {title}", title, 1, {label: sft[label][key] for label in labels}))
    for role in result.get("grpo", {}).get("roles", []):
        r, labels = result["grpo"][role], result["grpo_variants"]
        for key, title in (
            ("loss", "loss"),
            ("kl", "KL"),
            ("grad_norm", "grad norm"),
            ("sampling/sampling_logp_difference/mean", "|logp trainer - logp sampler|"),
            ("reward", "reward (recorded)"),
            ("seconds", "update s/step"),
            ("cpu_seconds", "update CPU s/step"),
        ):
            series = {label: r[label][key] for label in labels}
            if any(x is not None for ys in series.values() for x in ys):
                panels.append((f"GRPO {role}: {title}", title, 0, series))
    if not panels:
        return
    cols = 4
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (title, ylabel, first, series) in zip(axes.flat, panels, strict=False):
        for n, (label, ys) in enumerate(series.items()):
            pts = [(first + i, y) for i, y in enumerate(ys) if y is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="os^v"[n % 4], ms=3, lw=1.2, label=label)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(
        "fp32 vs bf16 compute (fp32 weights) on CPU; /all: TRL scores every position, /trained: only the "
        "trained ones -- timings need an idle machine",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- main --------------------------------------------------------------------------------------------------
def _variants(ap: argparse.ArgumentParser, flag: str, value: str) -> list[str]:
    labels = [v.strip() for v in value.split(",") if v.strip()]
    if bad := [v for v in labels if v not in VARIANTS]:
        ap.error(f"{flag}: unknown {bad}; known: {', '.join(VARIANTS)}")
    return labels


def main() -> None:
    from training.warmup.sft import DEFAULT_DISTILLER_EXAMPLES, DEFAULT_EXAMPLES, DEFAULT_GRAD_ACCUM

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--parts", default=None, help="sft, grpo or sft,grpo (default: sft, and grpo with --source)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "precision")
    ap.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("SFT")
    g.add_argument(
        "--sft-variants",
        default="fp32/all,fp32/trained,bf16/trained",
        help=f"in the order they run, the first the baseline; of {', '.join(VARIANTS)} (fp32/all: the "
        "warm-up before bf16 compute and trained-positions-only scoring)",
    )
    g.add_argument(
        "--sft-steps", type=int, default=12, help="optimizer steps per variant (the warm-up has 18)"
    )
    g.add_argument("--model", default="embedded", help="base model of the warm-up")
    g.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES)
    g.add_argument("--distiller-examples", type=int, default=DEFAULT_DISTILLER_EXAMPLES)
    g.add_argument("--grad-accum", type=int, default=DEFAULT_GRAD_ACCUM)
    g.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: all cores)"
    )
    g = ap.add_argument_group("GRPO")
    g.add_argument("--source", type=Path, help="a run directory with committed steps (runs/NAME)")
    g.add_argument(
        "--grpo-variants",
        default="fp32/all,bf16/all",
        help="as --sft-variants; /all is training/trainer.py as it is, /trained runs it with TRL's fused LM "
        "head limited to the trained positions (training.warmup.sft.trained_positions_only)",
    )
    g.add_argument("--grpo-steps", type=int, default=0, help="steps to replay (default: the source's)")
    g.add_argument("--roles", default="solver,proposer")
    g.add_argument("--together", action="store_true", help="run both roles' trainers at once, as a run does")
    g.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override the replay's config"
    )
    g.add_argument("--keep", action="store_true", help="keep the replays' checkpoints and weights")
    args = ap.parse_args()

    parts = (args.parts or ("sft,grpo" if args.source else "sft")).split(",")
    args.sft_variants = _variants(ap, "--sft-variants", args.sft_variants)
    args.grpo_variants = _variants(ap, "--grpo-variants", args.grpo_variants)
    args.roles = [r.strip() for r in args.roles.split(",")]
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
        "NOTE: timings need an idle machine; other CPU work distorts them, and one variant more than another."
    )
    print(
        f"CPU bf16 matrix units: {cpu_has_bf16_units()}; compute_dtype auto -> "
        f"{resolve_compute_dtype('auto', 'cpu')}; {load_note()}"
    )
    result: dict[str, Any] = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpu_bf16_units": cpu_has_bf16_units(),
        "load_before": os.getloadavg()[:2],
    }
    if "sft" in parts:
        result["sft_variants"] = args.sft_variants
        result["sft"] = sft_part(args)
        print_sft(result["sft"], args.sft_variants)
    if "grpo" in parts:
        result["grpo_variants"] = args.grpo_variants
        result["grpo"] = grpo_part(args)
        result["grpo"]["roles"] = args.roles
        print_grpo(result["grpo"], args.grpo_variants, args.roles)
    result["load_after"] = os.getloadavg()[:2]
    print(f"\n{load_note()} (this benchmark's own threads included)")
    (args.out / "precision_speed.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out / "precision_speed.png")
    print(f"wrote {args.out / 'precision_speed.json'} and {args.out / 'precision_speed.png'}")


if __name__ == "__main__":
    main()
