"""The learning curve's numbers: the probe evals a run wrote into its step records (``training.probe_eval``)."""

from __future__ import annotations

import pandas as pd

from sesa_runs.run_dir import Run

COLUMNS = ["step", "mode", "em", "score", "n", "errors", "policy_version", "bank_version", "seconds"]


def probe_curve(run: Run) -> pd.DataFrame:
    """One row per probed step and bank mode (EM and score in %, over ``n`` questions), by step; a probe
    that failed (``error``) or a mode without an answered question has no row."""
    m = run.metrics()
    rows = []
    for _, r in m.iterrows():
        probe = r.get("probe")
        if not isinstance(probe, dict):
            continue
        for mode in ("off", "on"):
            cell = probe.get(mode)
            if isinstance(cell, dict) and cell.get("em") is not None:
                rows.append(
                    {
                        "step": int(r["step"]),
                        "mode": mode,
                        **{k: cell.get(k) for k in ("em", "score", "n", "errors")},
                        **{k: probe.get(k) for k in ("policy_version", "bank_version", "seconds")},
                    }
                )
    return pd.DataFrame(rows, columns=COLUMNS)
