"""Read what training runs and evals write: the loading API behind the notebooks, `sesa trace` and `sesa report`.

Everything here reads plain files and never touches a live process (nor Chroma), so it is safe while a
run or an eval is still writing::

    from sesa_graph import runs

    run = runs.open_run("runs/tiny-cpu")     # a RunNotFoundError names what is missing
    run.steps()                               # committed steps (a run in progress: those so far)
    run.metrics()                             # one row per committed step (metrics.jsonl)
    bad = run.rollouts(role="solver", correct=False, skill="seed-bridge-entity")
    run.trace(bad.id.iloc[0])                 # one rollout turn by turn: HTML in Jupyter, text in a terminal
    run.bank_history(); run.skills()          # the skill bank per consolidation; the live counters

    ev = runs.open_eval("evals/NAME")
    ev.records(dataset="bamboogle", mode="on", failure="wrong_gold_retrieved")
    ev.off_on()                               # mean score per dataset per bank mode, and On - Off

What a run directory holds (written by ``training``): ``config.yaml`` (first), ``metrics.jsonl`` (one line
per committed step), ``trajectories/step-NNNNN/{proposer,solver}.parquet``, ``bank/`` (``skills.jsonl``,
``snapshots/vNNNN.jsonl`` + ``vNNNN.report.json``, ``state.json``) and, once finished, ``summary.json``.
A step counts as committed once its metrics line is written (the shards are written before it).
An eval directory (``sesa_eval/harness.py``) holds ``eval.json``, ``records.jsonl`` and ``report.json``.

Rollouts of both sources come as one DataFrame schema (:data:`COLUMNS`); ``id`` is what
:meth:`Run.trace` / :meth:`Eval.trace` and ``sesa trace --rollout`` take: ``role/step/question_id/sample``
for a run, the record key ``dataset/id/mode/seed`` for an eval.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from sesa_graph.run_files import (
    BANK_DIRS,
    COLUMNS,
    FAILURE_KINDS,
    NUMERIC,
    ROLES,
    TOKEN_COLUMNS,
    BankFiles,
    RunNotFoundError,
    as_list,
    docs_contain,
    eval_searches,
    failure_kind,
    failure_table,
    find_bank,
    loads,
    missing,
    not_found,
    read_json,
    read_jsonl_lines,
    rollout_frame,
    seed_key,
    select,
    skill_frame,
    truthy,
)
from sesa_graph.trace import Trace

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
    "read_jsonl_lines",
    "select",
    "truthy",
]

# ---- training runs ---------------------------------------------------------------------------------------


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
        bank = next((self.path / d for d in BANK_DIRS if (self.path / d).is_dir()), None)
        self.bank = BankFiles(bank)

    def __repr__(self) -> str:
        state = "finished" if self.finished else "in progress"
        return f"Run({str(self.path)!r}: {len(self.steps())} committed steps, {state})"

    @property
    def config(self) -> dict[str, Any]:
        import yaml

        try:
            return yaml.safe_load((self.path / "config.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            return {}

    @property
    def summary(self) -> dict[str, Any] | None:
        """summary.json (written when the run finished), else None."""
        return read_json(self.path / "summary.json")

    @property
    def finished(self) -> bool:
        return (self.path / "summary.json").is_file()

    # ---- steps and metrics ------------------------------------------------------------------------------
    def _metric_lines(self) -> list[dict[str, Any]]:
        return read_jsonl_lines(self.path / "metrics.jsonl")

    def steps(self) -> list[int]:
        """Committed steps: those with a metrics line (a resumed step counts once)."""
        return sorted({int(m["step"]) for m in self._metric_lines() if isinstance(m.get("step"), int)})

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
        """The consolidation committed after the last step (a metrics line without a step), if any."""
        last = [m["final_consolidation"] for m in self._metric_lines() if "final_consolidation" in m]
        return last[-1] if last else None

    def metrics(self) -> pd.DataFrame:
        """One row per committed step (the last line of a step wins), with the consolidation flattened
        into ``consolidation_*`` columns and ``n_groups`` / ``frontier_share`` derived."""
        by_step: dict[int, dict[str, Any]] = {}
        for m in self._metric_lines():
            if isinstance(m.get("step"), int):
                by_step[m["step"]] = m
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
        names = pq.read_schema(path).names
        cols = names if tokens else [c for c in names if c not in TOKEN_COLUMNS]
        df = pd.read_parquet(path, columns=cols)
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
        """One rollout turn by turn, with the skills that were in its prompt (see :class:`sesa_graph.trace.Trace`)."""
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


# ---- evals -----------------------------------------------------------------------------------------------


class Eval:
    """An eval directory (``sesa_eval/harness.py``). Make one with :func:`open_eval`."""

    kind = "eval"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise RunNotFoundError(
                f"{self.path} is not a directory (expected an eval directory such as evals/NAME)"
            )
        if not ((self.path / "records.jsonl").is_file() or (self.path / "eval.json").is_file()):
            hint = (
                " (it looks like a run directory: use open_run)"
                if (self.path / "config.yaml").exists()
                else ""
            )
            raise RunNotFoundError(
                f"{self.path} is not an eval directory: records.jsonl and eval.json are both "
                f"missing (`sesa eval` writes them){hint}"
            )
        self.name = self.path.name
        bank = (self.report or {}).get("bank") or {}
        path = bank.get("path") or (self.settings.get("bank") if isinstance(self.settings, dict) else None)
        self.bank = BankFiles(find_bank(Path(path)) if path else None)

    def __repr__(self) -> str:
        return f"Eval({str(self.path)!r}: {len(self._records())} records)"

    @property
    def settings(self) -> dict[str, Any]:
        return (read_json(self.path / "eval.json") or {}).get("settings", {})

    @property
    def report(self) -> dict[str, Any] | None:
        """report.json (written when the eval stopped), else None."""
        return read_json(self.path / "report.json")

    @property
    def finished(self) -> bool:
        return bool((self.report or {}).get("complete"))

    def _records(self) -> list[dict[str, Any]]:
        latest: dict[str, dict[str, Any]] = {}
        for r in read_jsonl_lines(self.path / "records.jsonl"):
            latest[r.get("key", str(len(latest)))] = r  # a re-run record supersedes the earlier one
        return list(latest.values())

    def records(self, **filters: Any) -> pd.DataFrame:
        """One row per (question, mode, seed) in :data:`COLUMNS` plus ``seed``, ``queries``, ``bank``,
        ``model``, ``elapsed_s``; filtered by :func:`select`'s filters."""
        rows = [self._row(r) for r in self._records()]
        return select(rollout_frame(rows, ("seed", "queries", "bank", "model", "elapsed_s")), **filters)

    @staticmethod
    def _row(r: dict[str, Any]) -> dict[str, Any]:
        golds = [str(g) for g in as_list(r.get("golds"))]
        searches = eval_searches(r)
        retrieved = docs_contain(searches, golds)
        turns = [{"text": t} for t in as_list(r.get("trace"))]
        return {
            **{k: v for k, v in r.items() if k not in ("searches", "turns", "trace")},
            "id": r.get("key"),
            "role": "solver",
            "step": None,
            "question_id": r.get("id"),
            "group_id": None,
            "sample": r.get("seed"),
            "final": r.get("prediction"),
            "golds": golds,
            "target": golds[0] if golds else "",
            "skill_ids": [str(x) for x in as_list(r.get("skill_ids"))],
            "skill_bank_version": r.get("bank_version"),
            "reward": float(r.get("score") or 0.0),
            "n_turns": r.get("turns"),
            "n_searches": len(searches) if searches is not None else len(as_list(r.get("queries"))),
            "queries": as_list(r.get("queries")),
            "gold_retrieved": retrieved,
            "failure": failure_kind(r.get("status"), r.get("correct"), retrieved, r.get("error")),
            "turns_json": json.dumps(turns),
            "searches_json": json.dumps(searches) if searches is not None else None,
        }

    def rollout(self, key: str) -> dict[str, Any]:
        df = self.records()
        hit = df[df["id"] == key]
        if hit.empty:
            raise KeyError(not_found(key, df["id"].tolist(), f"eval {self.path}"))
        return hit.iloc[0].to_dict()

    def trace(self, key: str) -> Trace:
        row = self.rollout(key)
        skills = self.bank.skill_texts(row["skill_ids"], row.get("skill_bank_version"))
        return Trace.from_row(row, skills=skills, source=str(self.path))

    def off_on(self, metric: str = "score") -> pd.DataFrame:
        """Per dataset (and the unweighted mean of datasets): the mean ``metric`` (%) and n of each bank
        mode, and ``on - off`` when both ran. Records with status ``error`` are left out, as in report.json."""
        df = self.records()
        df = df[df["status"] != "error"]
        modes = [m for m in ("off", "on", "placebo") if m in set(df["mode"])] + sorted(
            set(df["mode"].dropna()) - {"off", "on", "placebo"}
        )
        rows = []
        for ds in sorted(set(df["dataset"].dropna())):
            row: dict[str, Any] = {"dataset": ds}
            for m in modes:
                sub = df[(df["dataset"] == ds) & (df["mode"] == m)]
                row[m] = 100.0 * sub[metric].astype(float).mean() if len(sub) else None
                row[f"n_{m}"] = len(sub)
            rows.append(row)
        if rows:
            mean = {"dataset": "mean"}
            for m in modes:
                vals = [r[m] for r in rows if r[m] is not None]
                mean[m] = sum(vals) / len(vals) if len(vals) == len(rows) else None
                mean[f"n_{m}"] = sum(r[f"n_{m}"] for r in rows)
            rows.append(mean)
        out = pd.DataFrame(rows, columns=["dataset"] + [c for m in modes for c in (m, f"n_{m}")])
        if "off" in modes and "on" in modes:
            out["on - off"] = [
                None if missing(a) or missing(b) else b - a for a, b in zip(out["off"], out["on"])
            ]
        return out

    def paired(self, a: str = "off", b: str = "on") -> pd.DataFrame:
        """One row per question (and seed) run in both modes ``a`` and ``b``: each side's id, outcome and
        correctness, and ``change``: ``fixed`` (b right, a wrong), ``broken`` (a right, b wrong) or ``same``."""
        df = self.records()
        cols = [
            "dataset",
            "question_id",
            "seed",
            "question",
            "golds",
            f"id_{a}",
            f"id_{b}",
            f"failure_{a}",
            f"failure_{b}",
            f"correct_{a}",
            f"correct_{b}",
            "change",
        ]
        if df.empty:
            return pd.DataFrame(columns=cols)
        df = df.assign(seed=df["seed"].map(seed_key), correct=df["correct"].map(truthy))
        keep = ["dataset", "question_id", "seed", "id", "failure", "correct"]
        left = df[df["mode"] == a][keep + ["question", "golds"]]
        right = df[df["mode"] == b][keep]
        m = left.merge(right, on=["dataset", "question_id", "seed"], suffixes=(f"_{a}", f"_{b}"))
        m["change"] = [
            "fixed" if y and not x else "broken" if x and not y else "same"
            for x, y in zip(m[f"correct_{a}"], m[f"correct_{b}"])
        ]
        return m[cols].reset_index(drop=True)

    def skill_effects(self) -> pd.DataFrame:
        """Per skill retrieved in mode ``on``: how often it fired, and on those questions how often On was
        right where Off was wrong (``helped``) and the reverse (``hurt``), paired by dataset/id/seed."""
        df = self.records()
        df = df[df["status"] != "error"]
        seed = df["seed"].map(seed_key)
        df = df.assign(seed=seed, correct=df["correct"].map(truthy))
        off = {(r.dataset, r.question_id, r.seed): r.correct for r in df[df["mode"] == "off"].itertuples()}
        acc: dict[str, dict[str, Any]] = {}
        for r in df[df["mode"] == "on"].itertuples():
            base = off.get((r.dataset, r.question_id, r.seed))
            for sid in r.skill_ids:
                a = acc.setdefault(
                    sid,
                    {
                        "skill_id": sid,
                        "fired": 0,
                        "on_correct": 0,
                        "paired": 0,
                        "helped": 0,
                        "hurt": 0,
                        "datasets": set(),
                    },
                )
                a["fired"] += 1
                a["on_correct"] += r.correct
                a["datasets"].add(r.dataset)
                if base is not None:
                    a["paired"] += 1
                    a["helped"] += r.correct and not base
                    a["hurt"] += base and not r.correct
        rows = [
            {**a, "net": a["helped"] - a["hurt"], "datasets": ", ".join(sorted(a["datasets"]))}
            for a in acc.values()
        ]
        cols = ["skill_id", "fired", "on_correct", "paired", "helped", "hurt", "net", "datasets"]
        out = pd.DataFrame(rows, columns=cols)
        return out.sort_values(["net", "fired"], ascending=False).reset_index(drop=True) if len(out) else out

    def skill_firing(self) -> pd.DataFrame:
        """Skill id x dataset: how many mode-``on`` questions had the skill in the prompt."""
        df = self.records(mode="on")
        pairs = [(sid, ds) for ids, ds in zip(df["skill_ids"], df["dataset"]) for sid in ids]
        if not pairs:
            return pd.DataFrame()
        t = pd.crosstab(
            pd.Series([p[0] for p in pairs], name="skill"), pd.Series([p[1] for p in pairs], name="dataset")
        )
        return t.loc[t.sum(axis=1).sort_values(ascending=False).index]


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
        raise RunNotFoundError(
            f"{p} does not exist (expected a run directory runs/NAME or an eval directory evals/NAME)"
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
