"""A training run directory as a Python object (:class:`Run`): steps, metrics, rollouts, traces, the skill bank.

Open one with :func:`sesa_runs.load.open_run`; the module docstring of :mod:`sesa_runs.load` says what a run
directory holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from sesa_runs.files import (
    NUMERIC,
    ROLES,
    TOKEN_COLUMNS,
    BankFiles,
    RunNotFoundError,
    as_list,
    docs_contain,
    failure_kind,
    find_bank,
    loads,
    missing,
    not_found,
    read_json,
    rollout_frame,
    select,
    skill_frame,
)
from sesa_runs.trace import Trace
from tools.errors import UserError
from training.metrics_log import MetricsLog, read_metrics


class Run:
    """A training run directory (see the module docstring). Make one with :func:`open_run`."""

    kind = "run"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise RunNotFoundError(
                f"{self.path} is not a directory (expected a run directory such as runs/NAME)"
            )
        if not (self.path / "config.yaml").is_file():
            have = ", ".join(sorted(p.name for p in self.path.iterdir())[:8]) or "nothing"
            hint = (
                " (it looks like an eval directory: use open_eval)"
                if (self.path / "records.jsonl").exists() or (self.path / "eval.json").exists()
                else ""
            )
            raise RunNotFoundError(
                f"{self.path} is not a run directory: config.yaml is missing (a run holds "
                f"config.yaml, metrics.jsonl, trajectories/, bank/; this one holds {have}){hint}"
            )
        self.name = self.path.name
        self._shards: dict[Path, tuple[float, pd.DataFrame]] = {}
        self.bank = BankFiles(find_bank(self.path))

    def __repr__(self) -> str:
        state = "finished" if self.finished else "in progress"
        return f"Run({str(self.path)!r}: {len(self.steps())} committed steps, {state})"

    @property
    def config(self) -> dict[str, Any]:
        """The run's config.yaml as a mapping, read as any config is (bounded, no aliases); {} when it is
        missing or unreadable (a reader shows what it can)."""
        from sesa_graph.config_yaml import ConfigError, read_yaml_file

        try:
            data, _ = read_yaml_file(self.path / "config.yaml", "run config")
        except ConfigError:
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def summary(self) -> dict[str, Any] | None:
        """summary.json (written when the run finished), else None."""
        return read_json(self.path / "summary.json")

    @property
    def finished(self) -> bool:
        return (self.path / "summary.json").is_file()

    # ---- steps and metrics ------------------------------------------------------------------------------
    def _metrics_log(self) -> MetricsLog:
        """metrics.jsonl as :mod:`training.metrics_log` reads it: per step the latest attempt's record (a
        resume supersedes the records of steps it runs again), a torn last line skipped, a bad line an
        error naming file:line."""
        return read_metrics(self.path)

    def steps(self) -> list[int]:
        """Committed steps: those with a metrics line (a resumed step counts once)."""
        return self._metrics_log().steps

    def shard_steps(self) -> list[int]:
        """Steps with at least one trajectory shard, committed or not."""
        root = self.path / "trajectories"
        if not root.is_dir():
            return []
        return sorted(
            int(p.name.split("-")[1])
            for p in root.glob("step-*")
            if p.name.split("-")[1].isdigit() and any(p.glob("*.parquet"))
        )

    def pending_steps(self) -> list[int]:
        """Steps whose trajectories are written but whose metrics line is not (yet)."""
        done = set(self.steps())
        return [s for s in self.shard_steps() if s not in done]

    @property
    def final_consolidation(self) -> dict[str, Any] | None:
        """The consolidation committed after the last step (a metrics line without a step), if any; one
        before a later step (a run extended with --resume --steps) is not the final one."""
        return self._metrics_log().final_consolidation

    def metrics(self) -> pd.DataFrame:
        """One row per committed step (the latest attempt's record of it), with the consolidation flattened
        into ``consolidation_*`` columns and ``n_groups`` / ``frontier_share`` derived."""
        by_step = self._metrics_log().by_step
        rows = []
        for step in sorted(by_step):
            m = dict(by_step[step])
            c = m.get("consolidation") or {}
            rej = c.get("rejected")
            m.update(
                {
                    "consolidation_version": c.get("version"),
                    "consolidation_admitted": c.get("admitted", 0),
                    "consolidation_evicted": c.get("evicted", 0),
                    "consolidation_rejected": sum(rej.values()) if isinstance(rej, dict) else (rej or 0),
                    "consolidation_error": c.get("error"),
                }
            )
            rates = m.get("solver_success_rates") or []
            m["n_groups"] = len(rates)
            m["frontier_share"] = (sum(1 for p in rates if 0 < p < 1) / len(rates)) if rates else None
            rows.append(m)
        base = [
            "step",
            "items",
            "valid_proposals",
            "valid_rate",
            "reused_groups",
            "proposer_reward_mean",
            "solver_reward_mean",
            "solver_success_rates",
            "n_groups",
            "frontier_groups",
            "frontier_share",
            "resampled_groups",
            "batch_frontier_groups",
            "solver_status",
            "invalid_reasons",
            "failures",
            "bank_size",
            "bank_version",
            "queue",
            "consolidation_started",
            "consolidation_version",
            "consolidation_admitted",
            "consolidation_evicted",
            "consolidation_rejected",
            "consolidation_error",
            "seconds",
        ]
        extra = sorted({k for r in rows for k in r} - set(base))
        return pd.DataFrame(rows, columns=base + extra)

    # ---- rollouts ----------------------------------------------------------------------------------------
    def _shard(self, path: Path, tokens: bool) -> pd.DataFrame:
        import pyarrow.parquet as pq

        mtime = path.stat().st_mtime
        key = path.with_suffix(".tokens" if tokens else ".parquet")
        hit = self._shards.get(key)
        if hit is not None and hit[0] == mtime:
            return hit[1]
        import pyarrow as pa

        try:
            names = pq.read_schema(path).names
            cols = names if tokens else [c for c in names if c not in TOKEN_COLUMNS]
            df = pd.read_parquet(path, columns=cols)
        except (pa.ArrowException, OSError) as exc:
            raise UserError(
                f"{path}: a damaged trajectory shard ({' '.join(str(exc).split())[:200]}); move it out of "
                "the run to read the rest"
            ) from None
        self._shards[key] = (mtime, df)
        return df

    def rollouts(
        self, role: str | None = None, *, uncommitted: bool = False, tokens: bool = False, **filters: Any
    ) -> pd.DataFrame:
        """Rollouts of committed steps as one frame (:data:`COLUMNS`), filtered by :func:`select`'s filters.

        ``uncommitted`` adds steps whose metrics line is not written yet; ``tokens`` adds the token-id
        columns (prompt_ids, completion_ids, env_mask, logprobs)."""
        if role is not None and role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        steps = (
            self.shard_steps() if uncommitted else [s for s in self.steps() if s in set(self.shard_steps())]
        )
        rows: list[dict[str, Any]] = []
        for s in steps:
            for r in (role,) if role else ROLES:
                p = self.path / "trajectories" / f"step-{s:05d}" / f"{r}.parquet"
                if p.is_file():
                    rows += [self._row(rec) for rec in self._shard(p, tokens).to_dict("records")]
        return select(rollout_frame(rows, TOKEN_COLUMNS if tokens else ()), **filters)

    @staticmethod
    def _row(t: dict[str, Any]) -> dict[str, Any]:
        role = t.get("role")
        verdict = loads(t.get("verdict_json"), None) or {}
        searches = loads(t.get("searches_json"), [])
        golds = [t.get("target")] if t.get("target") else []
        solver = role == "solver"
        retrieved = docs_contain(searches, golds) if golds else None
        t = {k: (None if missing(v) and k not in NUMERIC else v) for k, v in t.items()}
        out = {
            **t,
            "id": f"{role}/{t.get('step')}/{t.get('question_id')}/{t.get('sample', 0)}",
            "dataset": "selfplay",
            "mode": None,
            "error": None,
            "golds": golds,
            "skill_ids": [str(x) for x in as_list(t.get("skill_ids"))],
            "score": verdict.get("score"),
            "em": verdict.get("em"),
            "f1": verdict.get("f1"),
            "judge_method": verdict.get("method"),
            "judge_raw": verdict.get("raw"),
            "gold_retrieved": retrieved,
            "failure": failure_kind(t.get("status"), t.get("correct"), retrieved) if solver else None,
        }
        for c in TOKEN_COLUMNS:
            if c in out:
                out[c] = as_list(out[c])
        return out

    def rollout(self, rollout_id: str) -> dict[str, Any]:
        """One rollout's row (committed or not) as a dict; a KeyError lists ids that look alike."""
        role = rollout_id.split("/", 1)[0]
        df = self.rollouts(role if role in ROLES else None, uncommitted=True)
        hit = df[df["id"] == rollout_id]
        if hit.empty:
            raise KeyError(not_found(rollout_id, df["id"].tolist(), f"run {self.path}"))
        return hit.iloc[0].to_dict()

    def trace(self, rollout_id: str) -> Trace:
        """One rollout turn by turn, with the skills that were in its prompt (see :class:`sesa_runs.trace.Trace`)."""
        row = self.rollout(rollout_id)
        skills = self.bank.skill_texts(row["skill_ids"], row.get("skill_bank_version"))
        return Trace.from_row(row, skills=skills, source=str(self.path))

    # ---- the skill bank ---------------------------------------------------------------------------------
    def skills(self) -> pd.DataFrame:
        """The bank's skills with their counters as of the last step boundary (``skills.jsonl``)."""
        return skill_frame(self.bank.live())

    def snapshot(self, version: int) -> pd.DataFrame:
        """The bank as committed at ``version`` (``snapshots/vNNNN.jsonl``)."""
        return skill_frame(self.bank.snapshot(version))

    def bank_history(self) -> pd.DataFrame:
        """One row per bank version: size, admitted / evicted (vs the previous snapshot), counters."""
        return self.bank.history()
