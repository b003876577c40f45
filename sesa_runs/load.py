"""Read what training runs and evals write: the loading API behind the notebooks, `sesa trace` and `sesa report`.

Everything here reads plain files and never touches a live process (nor Chroma), so it is safe while a
run or an eval is still writing::

    from sesa_runs import load

    run = load.open_run("runs/tiny-cpu")     # a RunNotFoundError names what is missing
    run.steps()                               # committed steps (a run in progress: those so far)
    run.metrics()                             # one row per committed step (metrics.jsonl)
    bad = run.rollouts(role="solver", correct=False, skill="seed-bridge-entity")
    run.trace(bad.id.iloc[0])                 # one rollout turn by turn: HTML in Jupyter, text in a terminal
    run.bank_history(); run.skills()          # the skill bank per consolidation; the live counters

    ev = load.open_eval("evals/NAME")
    ev.records(dataset="bamboogle", mode="on", failure="wrong_gold_retrieved")
    ev.off_on()                               # mean score per dataset per bank mode, and On - Off

What a run directory holds (written by ``training``): ``config.yaml`` (first), ``metrics.jsonl`` (append-only: a
record per step, the latest attempt's counting after a resume), ``trajectories/step-NNNNN/{proposer,solver}.parquet``,
``bank/`` (``skills.jsonl``, ``snapshots/vNNNN.jsonl`` + ``vNNNN.report.json``, ``state.json``) and, once finished, ``summary.json``.
A step counts as committed once its metrics line is written (the shards are written before it).
An eval directory (``sesa_eval/harness.py``) holds ``eval.json``, ``records.jsonl`` and ``report.json``.

The classes live in :mod:`sesa_runs.run_dir` and :mod:`sesa_runs.eval_dir`, the plain-file readers in
:mod:`sesa_runs.files`. Rollouts of both sources come as one DataFrame schema (:data:`COLUMNS`); ``id`` is what
:meth:`Run.trace` / :meth:`Eval.trace` and ``sesa trace --rollout`` take: ``role/step/question_id/sample``
for a run, the record key ``dataset/id/mode/seed`` for an eval.
"""

from __future__ import annotations

import os
from pathlib import Path

from sesa_graph.fsutil import read_jsonl
from sesa_runs.eval_dir import Eval
from sesa_runs.files import (
    COLUMNS,
    FAILURE_KINDS,
    RunNotFoundError,
    docs_contain,
    eval_searches,
    failure_kind,
    failure_table,
    missing,
    select,
    truthy,
)
from sesa_runs.run_dir import Run
from sesa_runs.trace import Trace

__all__ = [
    "COLUMNS",
    "FAILURE_KINDS",
    "Eval",
    "Run",
    "RunNotFoundError",
    "Trace",
    "docs_contain",
    "eval_searches",
    "failure_kind",
    "failure_table",
    "latest",
    "missing",
    "open_dir",
    "open_eval",
    "open_run",
    "read_jsonl",
    "select",
    "truthy",
]

# ---- opening -----------------------------------------------------------------------------------------------


def open_run(path: str | Path) -> Run:
    """A training run directory; :class:`RunNotFoundError` (naming what is missing) if it is not one."""
    return Run(path)


def open_eval(path: str | Path) -> Eval:
    """An eval directory; :class:`RunNotFoundError` (naming what is missing) if it is not one."""
    return Eval(path)


def open_dir(path: str | Path) -> Run | Eval:
    """A run or an eval directory, whichever ``path`` is."""
    p = Path(path)
    if (p / "config.yaml").is_file():
        return Run(p)
    if (p / "records.jsonl").is_file() or (p / "eval.json").is_file():
        return Eval(p)
    if not p.is_dir():
        what = "is a file, not a directory" if p.exists() else "does not exist"
        raise RunNotFoundError(
            f"{p} {what} (expected a run directory runs/NAME or an eval directory evals/NAME)"
        )
    raise RunNotFoundError(
        f"{p} is neither a run directory (config.yaml is missing) nor an eval directory "
        "(records.jsonl and eval.json are missing)"
    )


def latest(root: str | Path, kind: str = "run") -> Path | None:
    """The most recently modified run (``kind='run'``) or eval directory under ``root``, or None."""
    root = Path(root)
    marker = ("config.yaml",) if kind == "run" else ("records.jsonl", "eval.json")
    if not root.is_dir():
        return None
    found = [p for p in root.iterdir() if p.is_dir() and any((p / m).is_file() for m in marker)]
    return max(
        found, key=lambda p: max(os.path.getmtime(p / m) for m in marker if (p / m).exists()), default=None
    )
