"""Numerics of the trainers: which dtype the trained weights may be stored in, and which one computes.

GPU trainers keep fp32 master weights and optimizer state and compute in bf16 (autocast or FSDP2's mixed
precision policy). Storing the weights themselves in bf16 loses small updates: bf16 keeps 8 significant bits,
so a weight w can only move in steps of ``spacing(w) = 2**(floor(log2|w|) - 7)``; an Adam step moves a weight
by about the learning rate, and when that is under half the spacing the step rounds back to w.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

# A typical trained weight of a transformer LLM: the init std of Llama/Qwen/SmolLM2 linear layers (0.02)
TYPICAL_WEIGHT = 0.02
# significand bits after the leading one
MANTISSA_BITS = {"bfloat16": 7, "float16": 10, "float32": 23}


def spacing(dtype: str, w: float = TYPICAL_WEIGHT) -> float:
    """The gap between ``w`` and the next value the dtype can store.

    >>> spacing("bfloat16", 0.02), spacing("float32", 0.02) < 1e-8
    (0.0001220703125, True)
    """
    return 2.0 ** (math.floor(math.log2(abs(w))) - MANTISSA_BITS[dtype])


def check_param_dtype(param_dtype: str, learning_rate: float, optim: str) -> None:
    """Refuse weights stored in a dtype whose rounding would swallow an optimizer step at ``learning_rate``.

    >>> check_param_dtype("float32", 1e-6, "adamw_torch")
    >>> check_param_dtype("bfloat16", 1e-3, "adamw_torch")
    >>> check_param_dtype("bfloat16", 1e-6, "adamw_torch")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: train.param_dtype is bfloat16 with train.learning_rate 1e-06 and train.optim adamw_torch: ...
    """
    if param_dtype == "float32":
        return
    gap = spacing(param_dtype)
    if learning_rate < gap / 2:
        raise ValueError(
            f"train.param_dtype is {param_dtype} with train.learning_rate {learning_rate:g} and train.optim "
            f"{optim}: a {param_dtype} weight near {TYPICAL_WEIGHT} can only move in steps of {gap:.2g}, and "
            f"an optimizer step at lr {learning_rate:g} moves it by about {learning_rate:g}, which rounds away "
            "(the policy would barely learn). Use train.param_dtype: float32 (fp32 master weights and optimizer "
            "state; bf16 compute comes from train.compute_dtype)"
        )


@lru_cache(maxsize=1)
def cpu_has_bf16_units() -> bool:
    """The CPU advertises bf16 matrix instructions (AVX512-BF16 or AMX-BF16) in /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    flags = next(
        (line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []
    )
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_compute_dtype(compute_dtype: str, device: str) -> str:
    """'bfloat16' or 'float32' for a trainer on ``device`` ('cpu', 'cuda', 'cuda:1')."""
    if compute_dtype != "auto":
        return compute_dtype
    if device.startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if cpu_has_bf16_units() else "float32"
