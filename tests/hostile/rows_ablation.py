"""Rows of issue 32's inputs: a probe set evaluated at another cut than it was generated at, a stale warm
model under a probe eval, and a resume that changes the step budget of a schedule that decays over it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.hostile.harness import cli

A = "ablation"
ROOT = Path(__file__).resolve().parents[2]


def _cut_config(tmp: Path) -> list:
    cfg = tmp / "cut400.yaml"
    cfg.write_text("solver:\n  doc_chars: 400\n")
    return [
        "eval",
        "--datasets",
        "probe-v2",
        "--config",
        str(cfg),
        "--model",
        "embedded-warm",
        "--limit",
        "2",
    ]


def _stale_warm(tmp: Path) -> None:
    warm = tmp / ".sesa-home" / "models" / "smollm2-135m-warm"
    warm.mkdir(parents=True, exist_ok=True)
    (warm / ".complete").write_text("")
    (warm / "warmup.json").write_text(json.dumps({"heldout_split": "heldout-v0"}))


def _linear_run(tmp: Path) -> list:
    path = str(ROOT / "tests" / "training")
    if path not in sys.path:
        sys.path.insert(0, path)
    from resume_fixtures import make_run

    run = make_run(tmp, steps=5, committed=3, lr_scheduler="linear")
    return ["train", "--resume", str(run), "--steps", "9"]


ROWS = [
    cli(
        A,
        "eval --datasets probe-v2 at doc_chars 400 (generated at 240)",
        _cut_config,
        contains=["doc_chars 240", "400", "solver.doc_chars"],
    ),
    cli(
        A,
        "eval --datasets probe-v2 --model embedded-warm built before the split",
        ["eval", "--datasets", "probe-v2", "--model", "embedded-warm", "--limit", "2"],
        setup=_stale_warm,
        contains=["embedded-warm", "sesa warmup --force"],
    ),
    cli(
        A,
        "train --resume RUN --steps 9 with a linear schedule",
        _linear_run,
        contains=["--steps", "lr_scheduler=linear"],
    ),
]
