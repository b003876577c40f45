"""What ``sesa train`` shows per committed step: a live table on a terminal, one plain line otherwise.

Rich's ``Live`` redraws only on a terminal; under nohup, Slurm or ``> train.log`` it would print the table
once, at the end, cut to 80 columns. There each committed step is one line instead, flushed at once, in the
``key value`` pairs a batch-log reader (or ``grep``/``awk``) can follow (the default run's first step)::

    step 0 (1/4) | 189s, run 7m09s | solver reward +0.20 acc 0.20 | proposer reward -1.00 valid 0/4 reused 5 |
    frontier 0 (0) | bank 15 queue 0 | probe EM % bank off/on 0.0/12.5 (118s)

Every number comes from the step's ``metrics.jsonl`` record (``training.orchestrator``); ``loss`` is the
trainers' last logged TRL loss of the update that made the weights the step ran on (the update on the previous
step's batch, so none at a run's first step).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from rich.table import Table


def step_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="self-play", show_lines=False)
    for col in (
        "step",
        "valid",
        "reused",
        "p (groups)",
        "frontier batch (all)",
        "R prop",
        "R solv",
        "bank",
        "queue",
        "consolid.",
        "probe",  # EM % bank off/on
        "s",
    ):
        t.add_column(col, justify="right")
    for m in rows[-12:]:
        rates = m.get("solver_success_rates") or []
        t.add_row(
            str(m["step"]),
            f"{m['valid_proposals']}/{m['items']}",
            str(m.get("reused_groups", 0)),
            " ".join(f"{p:.1f}" for p in rates[:6]) + (" …" if len(rates) > 6 else ""),
            frontier(m),
            signed(m.get("proposer_reward_mean")),
            signed(m.get("solver_reward_mean")),
            str(m.get("bank_size", "-")),
            str(m.get("queue", "-")),
            consolidation(m),
            probe_cell(m.get("probe")),
            f"{m.get('seconds', 0):.0f}",
        )
    return t


# A model judge asked about this many exact-match misses of a step and calling every one Correct is more likely
# broken (an endpoint answering "Correct" to anything trained a whole run to exit 0) than right: the default
# run's 1.5B called 0-1 of 1-4 misses a step Correct (2026-12-07).
JUDGE_AGREES_ALL = 5


def step_line(m: dict[str, Any], steps: int, elapsed_s: float) -> str:
    """One committed step as one line (``steps``: the run's total; ``elapsed_s``: since this invocation
    started)."""
    rates = m.get("solver_success_rates") or []
    acc = f"{sum(rates) / len(rates):.2f}" if rates else "-"
    if by_model := (m.get("correct_by") or {}).get("llm"):
        acc += f" ({by_model} of {sum(m['correct_by'].values())} correct by the model judge)"
        asked = (m.get("judge_methods") or {}).get("llm", 0)
        if asked >= JUDGE_AGREES_ALL and by_model == asked:  # a judge that says Correct to anything
            acc += f" WARNING: the model judge called all {asked} misses it saw Correct; check its endpoint"
    parts = [
        f"step {m['step']} ({m['step'] + 1}/{steps})",  # steps count from 0, as in metrics.jsonl
        f"{m.get('seconds', 0):.0f}s, run {clock(elapsed_s)}",
        f"solver reward {signed(m.get('solver_reward_mean'))} acc {acc}",
        f"proposer reward {signed(m.get('proposer_reward_mean'))} valid {m['valid_proposals']}/{m['items']}"
        + (f" reused {m['reused_groups']}" if m.get("reused_groups") else ""),
        f"frontier {frontier(m)}",
        f"bank {m.get('bank_size', '-')} queue {m.get('queue', '-')}",
    ]
    if c := consolidation(m):
        parts.append(f"consolidation {c}")
    if losses := [f"{r} {u['loss']:.4g}" for r, u in sorted((m.get("updates") or {}).items()) if "loss" in u]:
        parts.append("loss " + " ".join(losses))
    if p := m.get("probe"):
        parts.append(f"probe EM % bank off/on {probe_cell(p)} ({p.get('seconds', 0):.0f}s)")
    if m.get("wait_trainers_s"):
        parts.append(f"waited for trainers {m['wait_trainers_s']:.0f}s")
    return " | ".join(parts)


def emit(line: str, out: TextIO | None = None) -> None:
    """Print and flush now: stdout to a file is block-buffered, so a batch log would otherwise show the run's
    lines only when the buffer fills or the run ends."""
    out = out or sys.stdout
    print(line, file=out, flush=True)


def frontier(m: dict[str, Any]) -> str:
    """Groups with reward variance: in the trainer's batch, and of all the step ran."""
    if "batch_frontier_groups" not in m:  # runs from before the batch was counted
        return str(m.get("frontier_groups", 0))
    return f"{m['batch_frontier_groups']} ({m.get('frontier_groups', 0)})"


def consolidation(m: dict[str, Any]) -> str:
    c = m.get("consolidation")
    if c:
        return f"+{c['admitted']}" + (" err" if c.get("error") else "")
    return "started" if m.get("consolidation_started") else ""


def probe_cell(p: dict[str, Any] | None) -> str:
    """The learning curve's point of a probed step (training.probe_eval): EM % bank off / on."""
    if not p:
        return ""
    if "error" in p:
        return "failed"
    return "/".join(
        f"{p[m]['em']:.1f}" if (p.get(m) or {}).get("em") is not None else "-" for m in ("off", "on")
    )


def signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}"


def clock(seconds: float) -> str:
    """``7m02s``; ``1h03m`` from an hour on."""
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
