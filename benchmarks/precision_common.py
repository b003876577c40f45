"""What the precision benchmarks share: the variants, timing and the comparison of two runs' curves
(benchmarks/precision_speed.py, benchmarks/precision_grpo.py)."""

from __future__ import annotations

import os
import statistics
import sys
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


def mean_or_none(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def fmt(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def series_at(res: dict[str, Any], label: str, key: str, i: int) -> Any:
    xs = res[label].get(key) or []
    return xs[i] if i < len(xs) else None


def timing(wall: list[float], cpu: list[float]) -> dict[str, Any]:
    return {
        "seconds": wall,
        "mean_s": mean_or_none(wall),
        "mean_s_after_first": mean_or_none(wall[1:]),
        "cpu_seconds": cpu,
        "mean_cpu_s": mean_or_none(cpu),
        "mean_cpu_s_after_first": mean_or_none(cpu[1:]),
    }


def compare(res: dict[str, Any], labels: list[str], what: str) -> None:
    """Each variant's wall and CPU seconds a step; every variant's speedup over the first (stored in
    ``res['speedups']``) and its largest loss and grad-norm gaps to it. (A GRPO loss is about 0 whatever the
    dtype: at the first pass the ratio is 1 and the group's advantages sum to 0; its grad norm is what differs.)"""
    for label in labels:
        r = res[label]
        print(
            f"{what} {label:>12}: {fmt(r['mean_s'], '.2f')} s/step ({fmt(r['mean_s_after_first'], '.2f')} after "
            f"the first), {fmt(r['mean_cpu_s'], '.2f')} CPU-s/step"
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
            f"{what} speedup of {label} over {base}: {fmt(sp['mean_s'], '.2f')}x wall "
            f"({fmt(sp['mean_s_after_first'], '.2f')}x after the first step), {fmt(sp['mean_cpu_s'], '.2f')}x CPU"
            + gap
        )
