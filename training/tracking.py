"""Experiment trackers (``train.report_to``): where a run's numbers show up besides ``metrics.jsonl``.

The two TRL trainers log their losses, KL and learning rate through transformers' integrations; the
orchestrator mirrors each committed step's record (rewards, valid rate, frontier share, bank size, phase
times...) through :class:`StepTracker`. For ``tensorboard`` everything lands under ``runs/NAME/tensorboard/``
(``solver/``, ``proposer/``, ``selfplay/``), so ``tensorboard --logdir runs/NAME/tensorboard`` shows one run,
and ``--logdir runs`` compares runs.

One x axis for all of them: TRL's global step, the optimizer updates done. Step t's batch is trained on by
updates ``t*u+1 .. (t+1)*u`` (u = ``train.updates_per_step``), so self-play step t is plotted at ``(t+1)*u``,
beside the TRL numbers of the update that learned from its rollouts (plotted at t they were one step apart).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

from tools.errors import UserError

# report_to value -> (module that must be importable, how to get it)
TRACKERS = {
    "tensorboard": ("tensorboard", "bash scripts/setup.sh tracking (or pip install tensorboard)"),
    "trackio": ("trackio", "pip install trackio"),
    "wandb": ("wandb", "pip install wandb (and `wandb login`)"),
}


def tensorboard_dir(run_dir: Path, part: str) -> Path:
    """Where one part of a run (``solver``, ``proposer``, ``selfplay``) writes its TensorBoard events."""
    return Path(run_dir) / "tensorboard" / part


def check_tracker(report_to: str) -> None:
    """Fail before anything starts when the tracker cannot be used (not after the first training step)."""
    if report_to == "none":
        return
    if report_to not in TRACKERS:
        raise UserError(f"train.report_to is {report_to!r}; use one of: none, {', '.join(TRACKERS)}")
    module, how = TRACKERS[report_to]
    if importlib.util.find_spec(module) is None:
        raise UserError(f"train.report_to is {report_to!r} but the {module} package is not installed: {how}")


def scalars(record: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a metrics record, nested dicts flattened to ``a/b`` (what a tracker can plot)."""
    out: dict[str, float] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool) or isinstance(value, int | float) and math.isfinite(value):
            out[name] = float(value)
        elif isinstance(value, dict):
            out.update(scalars(value, name + "/"))
    return out


def plot_step(step: int, updates_per_step: int) -> int:
    """Self-play step ``step`` on TRL's axis: the global step of the last update trained on its batch.

    >>> plot_step(0, 1), plot_step(3, 2)
    (1, 8)
    """
    return (step + 1) * updates_per_step


# the trackio / wandb project of every sesa run: its self-play curves (`NAME-selfplay`) and both trainers'
# (`NAME-solver`, `NAME-proposer`, training.trainer) side by side
TRACKER_PROJECT = "sesa-graph"


class StepTracker:
    """Mirrors each committed step's metrics record to the configured tracker (a no-op for ``none``)."""

    def __init__(self, run_dir: Path, report_to: str, run_name: str, updates_per_step: int = 1) -> None:
        self.report_to = report_to
        self.updates_per_step = updates_per_step
        self._writer: Any = None
        self._module: Any = None
        if report_to == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(tensorboard_dir(run_dir, "selfplay")))
        elif report_to in ("trackio", "wandb"):
            import importlib

            self._module = importlib.import_module(report_to)
            # one tracker run per sesa run (and per resume of it, under the same name)
            self._module.init(project=TRACKER_PROJECT, name=f"{run_name}-selfplay")

    def log_step(self, record: dict[str, Any]) -> None:
        if "step" not in record:
            return
        step = plot_step(int(record["step"]), self.updates_per_step)
        # ``updates`` (the trainers' TRL numbers of the previous update) are TRL's own curves already, at their
        # own step: mirrored here they would be the same curve again, one step later
        values = {k: v for k, v in scalars(record).items() if k != "step" and not k.startswith("updates/")}
        if self._writer is not None:
            for key, value in values.items():
                self._writer.add_scalar(f"selfplay/{key}", value, step)
            self._writer.flush()
        elif self._module is not None:
            self._module.log({f"selfplay/{k}": v for k, v in values.items()}, step=step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        elif self._module is not None and hasattr(self._module, "finish"):
            self._module.finish()
