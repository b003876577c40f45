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
through the real trainer job, once per variant and role, started with the command ``sesa train`` uses
(``training.trainer_jobs.trainer_command``: the config's launcher and ranks). Each replay gets a fresh run
directory holding the source's ``config.yaml`` (with ``train.compute_dtype``, ``train.steps`` = ``--grpo-steps``
and ``train.report_to: none``), its trajectory shards and their commit records, and this script hosts the
orchestrator's coordinator (``training.coordinator``; the source's cluster settings on a free loopback port)
with every step committed up front, so the trainer publishes its weights, says it is ready for step K
(``ready/<role>/K`` in the coordinator's store, polled every 0.1 s) and trains straight through. The update of
step K is ready(K+1) - ready(K): reading the shard, the log-prob passes, forward and backward over the batch,
the optimizer step, any checkpoint due and publishing the weights -- what ``sesa train`` counts as its GRPO
update phase (the last step has no next ready, so N steps time N-1 updates; CPU seconds count the launcher and
every rank of the job). Loss, grad norm, KL (logged only when ``train.beta`` > 0), the gap between the trainer's
and the sampler's log-probs, TRL's ``step_time`` and the reward come from the trainer's ``trainer_state.json``
(its log lines when no checkpoint is left). The reward is the recorded one: equal in every variant by
construction. More steps than the source has reuse its shards in turn (off-policy then, alike for every
variant). By default the roles run one after the other, each with the config's ``train.trainer_threads``;
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
import gc
import itertools
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from precision_common import (
    ROOT,
    VARIANTS,
    compare,
    fmt,
    load_note,
    series_at,
    share_note,
    timing,
)
from precision_grpo import grpo_part, print_grpo


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
                f"  {label}: {sum(wall):.0f}s, {fmt(r['mean_s'], '.2f')} s/step; params "
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
        cells = [(series_at(res, label, key, i), spec) for key, _, spec in cols for label in labels]
        print(
            f"{i + 1:>4}"
            + "".join(f"{fmt(v, spec):>{w}}" for (v, spec), w in zip(cells, widths, strict=True))
        )
    compare(res, labels, "SFT")


# ---- GRPO ------------------------------------------------------------------------------------------------------


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
        default="fp32/all,bf16/all,bf16/trained",
        help="as --sft-variants; the trainer runs with train.score_trained_positions_only false (/all: TRL's CPU "
        "default, the trainer before issue 25 with fp32) or true (/trained: the trainer now)",
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
