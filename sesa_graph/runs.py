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
An eval directory (``graphs/evaluate.py``) holds ``eval.json``, ``records.jsonl`` and ``report.json``.

Rollouts of both sources come as one DataFrame schema (:data:`COLUMNS`); ``id`` is what
:meth:`Run.trace` / :meth:`Eval.trace` and ``sesa trace --rollout`` take: ``role/step/question_id/sample``
for a run, the record key ``dataset/id/mode/seed`` for an eval.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from sesa_graph.scoring import contains_answer
from sesa_graph.trace import Trace

ROLES = ("proposer", "solver")
TOKEN_COLUMNS = ("prompt_ids", "completion_ids", "env_mask", "logprobs")
BANK_DIRS = ("bank", "memory")  # where a run keeps its skill bank (the orchestrator writes bank/)

COLUMNS = (
    "id", "role", "step", "question_id", "group_id", "sample", "dataset", "mode", "status", "error", "final",
    "question", "golds", "target", "hops", "skill_ids", "skill_bank_version", "valid", "invalid_reason",
    "correct", "reward", "score", "em", "f1", "judge_method", "judge_raw", "success_rate", "n_turns",
    "n_searches", "trainable", "selected", "reused", "policy_version", "failure", "gold_retrieved",
    "turns_json", "searches_json",
)
"""Columns of every rollout frame. ``golds``: the gold answers (a run's solver gold is its ``target``);
``reward``: the trained reward (an eval: the judge score); ``failure``: see :data:`FAILURE_KINDS`;
``gold_retrieved``: a gold answer occurs in a retrieved document (None when documents were not recorded)."""

FAILURE_KINDS = {
    "malformed": "broke the tag protocol (no well-formed answer)",
    "max_turns": "ran out of turns or tokens still searching",
    "search_error": "the search tool failed",
    "error": "the rollout raised (not a search failure)",
    "wrong_gold_retrieved": "answered wrongly although a retrieved document contains the gold answer",
    "wrong_gold_not_retrieved": "answered wrongly; no retrieved document contains the gold answer",
    "wrong_retrieval_unknown": "answered wrongly; the retrieved documents were not recorded",
}
"""The failure taxonomy of solver rollouts (``failure`` column; ``correct`` for successes, None for proposers)."""


class RunNotFoundError(FileNotFoundError):
    """A path that is not a run (or eval) directory; the message names what is missing."""


# ---- small readers ---------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_jsonl_lines(path: Path) -> list[dict[str, Any]]:
    """The parseable JSON objects of a JSONL file; a line being written (torn) is skipped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.strip():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _as_list(v: Any) -> list:
    if v is None or (isinstance(v, float) and v != v):
        return []
    return [x for x in v] if not isinstance(v, str) else [v]


def _loads(text: Any, default: Any) -> Any:
    if not isinstance(text, str) or not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def truthy(v: Any) -> bool:
    """A flag from a frame cell: None and NaN are False."""
    return v is not None and not (isinstance(v, float) and v != v) and bool(v)


def docs_contain(searches: Sequence[dict[str, Any]] | None, golds: Sequence[str]) -> bool | None:
    """Whether any retrieved document (title or text) contains a gold answer; None if none were recorded."""
    if searches is None or any(s.get("docs") is None for s in searches):
        return None
    return any(contains_answer(d.get("title"), golds) or contains_answer(d.get("text"), golds)
               for s in searches for d in s.get("docs") or [])


def failure_kind(status: str | None, correct: Any, gold_retrieved: bool | None, error: str | None = None) -> str:
    """``correct`` or one of :data:`FAILURE_KINDS` for one solver rollout."""
    if truthy(correct):
        return "correct"
    if status in ("malformed", "max_turns", "search_error"):
        return status
    if status == "error":
        return "search_error" if (error or "").startswith("search_error") else "error"
    if gold_retrieved is None:
        return "wrong_retrieval_unknown"
    return "wrong_gold_retrieved" if gold_retrieved else "wrong_gold_not_retrieved"


def select(df: pd.DataFrame, *, role: str | None = None, status: str | Iterable[str] | None = None,
           dataset: str | Iterable[str] | None = None, mode: str | Iterable[str] | None = None,
           failure: str | Iterable[str] | None = None, skill: str | None = None, correct: bool | None = None,
           min_reward: float | None = None, max_reward: float | None = None,
           step: int | Iterable[int] | None = None, guided: bool | None = None) -> pd.DataFrame:
    """Rows of a rollout frame that match every filter given (a str filter may also be a list of values).

    ``skill``: that skill id was in the prompt; ``guided``: any skill was in the prompt (or none, False)."""
    mask = pd.Series(True, index=df.index)
    for col, want in (("role", role), ("status", status), ("dataset", dataset), ("mode", mode),
                      ("failure", failure), ("step", step)):
        if want is not None:
            values = [want] if isinstance(want, (str, int)) else list(want)
            mask &= df[col].isin(values)
    if skill is not None:
        mask &= df["skill_ids"].map(lambda ids: skill in _as_list(ids)).astype(bool)
    if guided is not None:
        mask &= df["skill_ids"].map(lambda ids: bool(len(_as_list(ids))) == guided).astype(bool)
    if correct is not None:
        mask &= df["correct"].map(truthy).astype(bool) == correct
    if min_reward is not None:
        mask &= df["reward"].astype(float) >= min_reward
    if max_reward is not None:
        mask &= df["reward"].astype(float) <= max_reward
    return df[mask].reset_index(drop=True)


def failure_table(df: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Counts and shares of each outcome (``correct`` and :data:`FAILURE_KINDS`) in a rollout frame,
    optionally per value of column ``by`` (e.g. ``mode`` or ``dataset``); proposer rows are left out."""
    df = df[df["role"] != "proposer"] if len(df) else df
    cols = ([by] if by else []) + ["outcome", "n", "share", "meaning"]
    rows = []
    for key, sub in ([(None, df)] if by is None else list(df.groupby(by, sort=True))):
        counts = sub["failure"].value_counts()
        for kind in ("correct", *FAILURE_KINDS):
            if counts.get(kind, 0):
                rows.append(([key] if by else []) + [kind, int(counts[kind]), counts[kind] / len(sub),
                                                     FAILURE_KINDS.get(kind, "answered correctly")])
    return pd.DataFrame(rows, columns=cols)


def _frame(rows: list[dict[str, Any]], extra: Sequence[str] = ()) -> pd.DataFrame:
    cols = list(COLUMNS) + [c for c in extra if c not in COLUMNS]
    df = pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    return df


def _skill_frame(skills: list[dict[str, Any]]) -> pd.DataFrame:
    cols = ["id", "category", "source", "seed", "created_step", "retrieved", "helpful", "hurt", "score",
            "description", "trigger", "avoid", "queries"]
    rows = [{**s, "score": int(s.get("helpful", 0)) - int(s.get("hurt", 0))} for s in skills]
    return pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame({c: pd.Series(dtype=object) for c in cols})


class _Bank:
    """A skill bank's plain files: live skills, snapshots and their reports (never Chroma)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def _snap_paths(self) -> list[Path]:
        return sorted((self.path / "snapshots").glob("v[0-9]*.jsonl")) if self.path else []

    def live(self) -> list[dict[str, Any]]:
        if self.path is None:
            return []
        live = read_jsonl_lines(self.path / "skills.jsonl")
        if not live and self._snap_paths():
            live = read_jsonl_lines(self._snap_paths()[-1])
        return live

    def snapshot(self, version: int) -> list[dict[str, Any]]:
        if self.path is None:
            return []
        return read_jsonl_lines(self.path / "snapshots" / f"v{int(version):04d}.jsonl")

    def skill_texts(self, ids: Sequence[str], version: Any = None) -> list[dict[str, Any]]:
        """The skills with these ids as they were at bank ``version`` (else as they are now), in order, with
        today's counters (``evicted`` set when the bank no longer has one); unknown ids as ``{id}``."""
        live = {s["id"]: s for s in self.live()}
        found: dict[str, dict[str, Any]] = {}
        if version is not None and version == version:
            try:
                found = {s["id"]: s for s in self.snapshot(int(version))}
            except (TypeError, ValueError):
                pass
        out = []
        for i in ids:
            s = dict(found.get(i) or live.get(i) or {"id": i})
            if i in live:  # the text that was in the prompt, the counters as they are now
                s.update({c: live[i].get(c, 0) for c in ("retrieved", "helpful", "hurt")})
            elif len(s) > 1:
                s["evicted"] = True
            out.append(s)
        return out

    def history(self) -> pd.DataFrame:
        rows, before = [], None
        for p in self._snap_paths():
            skills = read_jsonl_lines(p)
            ids = {s["id"] for s in skills}
            rep = _read_json(p.with_name(p.stem + ".report.json")) or {}
            version = int(p.stem.lstrip("v"))
            rejected = rep.get("rejected") or {}
            rows.append({
                "version": version, "step": rep.get("step", 0), "n_skills": len(skills),
                "n_seed": sum(1 for s in skills if s.get("seed")),
                "admitted": len(ids - before) if before is not None else 0,
                "evicted": len(before - ids) if before is not None else 0,
                "admitted_ids": sorted(ids - before) if before is not None else [],
                "evicted_ids": sorted(before - ids) if before is not None else [],
                "rejected": sum(rejected.values()) if isinstance(rejected, dict) else int(rejected or 0),
                "picked": rep.get("picked", 0), "error": rep.get("error"),
                "retrieved": sum(int(s.get("retrieved", 0)) for s in skills),
                "helpful": sum(int(s.get("helpful", 0)) for s in skills),
                "hurt": sum(int(s.get("hurt", 0)) for s in skills),
            })
            before = ids
        cols = ["version", "step", "n_skills", "n_seed", "admitted", "evicted", "admitted_ids", "evicted_ids",
                "rejected", "picked", "error", "retrieved", "helpful", "hurt"]
        return pd.DataFrame(rows, columns=cols)


# ---- training runs ---------------------------------------------------------------------------------------


class Run:
    """A training run directory (see the module docstring). Make one with :func:`open_run`."""

    kind = "run"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise RunNotFoundError(f"{self.path} is not a directory (expected a run directory such as runs/NAME)")
        if not (self.path / "config.yaml").is_file():
            have = ", ".join(sorted(p.name for p in self.path.iterdir())[:8]) or "nothing"
            hint = " (it looks like an eval directory: use open_eval)" if (self.path / "records.jsonl").exists() \
                or (self.path / "eval.json").exists() else ""
            raise RunNotFoundError(f"{self.path} is not a run directory: config.yaml is missing (a run holds "
                                   f"config.yaml, metrics.jsonl, trajectories/, bank/; this one holds {have}){hint}")
        self.name = self.path.name
        self._shards: dict[Path, tuple[float, pd.DataFrame]] = {}
        bank = next((self.path / d for d in BANK_DIRS if (self.path / d).is_dir()), None)
        self.bank = _Bank(bank)

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
        return _read_json(self.path / "summary.json")

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
        return sorted(int(p.name.split("-")[1]) for p in root.glob("step-*")
                      if p.name.split("-")[1].isdigit() and any(p.glob("*.parquet")))

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
            m.update({
                "consolidation_version": c.get("version"), "consolidation_admitted": c.get("admitted", 0),
                "consolidation_evicted": c.get("evicted", 0),
                "consolidation_rejected": sum(rej.values()) if isinstance(rej, dict) else (rej or 0),
                "consolidation_error": c.get("error"),
            })
            rates = m.get("solver_success_rates") or []
            m["n_groups"] = len(rates)
            m["frontier_share"] = (sum(1 for p in rates if 0 < p < 1) / len(rates)) if rates else None
            rows.append(m)
        base = ["step", "items", "valid_proposals", "valid_rate", "reused_groups", "proposer_reward_mean",
                "solver_reward_mean", "solver_success_rates", "n_groups", "frontier_groups", "frontier_share",
                "solver_status", "invalid_reasons", "failures", "bank_size", "bank_version", "queue",
                "consolidation_started", "consolidation_version", "consolidation_admitted",
                "consolidation_evicted", "consolidation_rejected", "consolidation_error", "seconds"]
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

    def rollouts(self, role: str | None = None, *, uncommitted: bool = False, tokens: bool = False,
                 **filters: Any) -> pd.DataFrame:
        """Rollouts of committed steps as one frame (:data:`COLUMNS`), filtered by :func:`select`'s filters.

        ``uncommitted`` adds steps whose metrics line is not written yet; ``tokens`` adds the token-id
        columns (prompt_ids, completion_ids, env_mask, logprobs)."""
        if role is not None and role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        steps = self.shard_steps() if uncommitted else [s for s in self.steps() if s in set(self.shard_steps())]
        rows: list[dict[str, Any]] = []
        for s in steps:
            for r in (role,) if role else ROLES:
                p = self.path / "trajectories" / f"step-{s:05d}" / f"{r}.parquet"
                if p.is_file():
                    rows += [self._row(rec) for rec in self._shard(p, tokens).to_dict("records")]
        return select(_frame(rows, TOKEN_COLUMNS if tokens else ()), **filters)

    @staticmethod
    def _row(t: dict[str, Any]) -> dict[str, Any]:
        role = t.get("role")
        verdict = _loads(t.get("verdict_json"), None) or {}
        searches = _loads(t.get("searches_json"), [])
        golds = [t.get("target")] if t.get("target") else []
        solver = role == "solver"
        retrieved = docs_contain(searches, golds) if golds else None
        out = {**t,
               "id": f"{role}/{t.get('step')}/{t.get('question_id')}/{t.get('sample', 0)}",
               "dataset": "selfplay", "mode": None, "error": None, "golds": golds,
               "skill_ids": [str(x) for x in _as_list(t.get("skill_ids"))],
               "score": verdict.get("score"), "em": verdict.get("em"), "f1": verdict.get("f1"),
               "judge_method": verdict.get("method"), "judge_raw": verdict.get("raw"),
               "gold_retrieved": retrieved,
               "failure": failure_kind(t.get("status"), t.get("correct"), retrieved) if solver else None}
        for c in TOKEN_COLUMNS:
            if c in out:
                out[c] = _as_list(out[c])
        return out

    def rollout(self, rollout_id: str) -> dict[str, Any]:
        """One rollout's row (committed or not) as a dict; a KeyError lists ids that look alike."""
        role = rollout_id.split("/", 1)[0]
        df = self.rollouts(role if role in ROLES else None, uncommitted=True)
        hit = df[df["id"] == rollout_id]
        if hit.empty:
            raise KeyError(_not_found(rollout_id, df["id"].tolist(), f"run {self.path}"))
        return hit.iloc[0].to_dict()

    def trace(self, rollout_id: str) -> Trace:
        """One rollout turn by turn, with the skills that were in its prompt (see :class:`sesa_graph.trace.Trace`)."""
        row = self.rollout(rollout_id)
        skills = self.bank.skill_texts(row["skill_ids"], row.get("skill_bank_version"))
        return Trace.from_row(row, skills=skills, source=str(self.path))

    # ---- the skill bank ---------------------------------------------------------------------------------
    def skills(self) -> pd.DataFrame:
        """The bank's skills with their counters as of the last step boundary (``skills.jsonl``)."""
        return _skill_frame(self.bank.live())

    def snapshot(self, version: int) -> pd.DataFrame:
        """The bank as committed at ``version`` (``snapshots/vNNNN.jsonl``)."""
        return _skill_frame(self.bank.snapshot(version))

    def bank_history(self) -> pd.DataFrame:
        """One row per bank version: size, admitted / evicted (vs the previous snapshot), counters."""
        return self.bank.history()


# ---- evals -----------------------------------------------------------------------------------------------


class Eval:
    """An eval directory (``graphs/evaluate.py``). Make one with :func:`open_eval`."""

    kind = "eval"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise RunNotFoundError(f"{self.path} is not a directory (expected an eval directory such as evals/NAME)")
        if not ((self.path / "records.jsonl").is_file() or (self.path / "eval.json").is_file()):
            hint = " (it looks like a run directory: use open_run)" if (self.path / "config.yaml").exists() else ""
            raise RunNotFoundError(f"{self.path} is not an eval directory: records.jsonl and eval.json are both "
                                   f"missing (`sesa eval` writes them){hint}")
        self.name = self.path.name
        bank = (self.report or {}).get("bank") or {}
        path = bank.get("path") or (self.settings.get("bank") if isinstance(self.settings, dict) else None)
        self.bank = _Bank(_find_bank(Path(path)) if path else None)

    def __repr__(self) -> str:
        return f"Eval({str(self.path)!r}: {len(self._records())} records)"

    @property
    def settings(self) -> dict[str, Any]:
        return (_read_json(self.path / "eval.json") or {}).get("settings", {})

    @property
    def report(self) -> dict[str, Any] | None:
        """report.json (written when the eval stopped), else None."""
        return _read_json(self.path / "report.json")

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
        return select(_frame(rows, ("seed", "queries", "bank", "model", "elapsed_s")), **filters)

    @staticmethod
    def _row(r: dict[str, Any]) -> dict[str, Any]:
        golds = [str(g) for g in _as_list(r.get("golds"))]
        searches = eval_searches(r)
        retrieved = docs_contain(searches, golds)
        turns = [{"text": t} for t in _as_list(r.get("trace"))]
        return {
            **{k: v for k, v in r.items() if k not in ("searches", "turns", "trace")},
            "id": r.get("key"), "role": "solver", "step": None, "question_id": r.get("id"), "group_id": None,
            "sample": r.get("seed"), "final": r.get("prediction"), "golds": golds, "target": golds[0] if golds else "",
            "skill_ids": [str(x) for x in _as_list(r.get("skill_ids"))], "skill_bank_version": r.get("bank_version"),
            "reward": float(r.get("score") or 0.0), "n_turns": r.get("turns"),
            "n_searches": len(searches) if searches is not None else len(_as_list(r.get("queries"))),
            "queries": _as_list(r.get("queries")), "gold_retrieved": retrieved,
            "failure": failure_kind(r.get("status"), r.get("correct"), retrieved, r.get("error")),
            "turns_json": json.dumps(turns), "searches_json": json.dumps(searches) if searches is not None else None,
        }

    def rollout(self, key: str) -> dict[str, Any]:
        df = self.records()
        hit = df[df["id"] == key]
        if hit.empty:
            raise KeyError(_not_found(key, df["id"].tolist(), f"eval {self.path}"))
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
        modes = [m for m in ("off", "on", "placebo") if m in set(df["mode"])] + \
            sorted(set(df["mode"].dropna()) - {"off", "on", "placebo"})
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
            out["on - off"] = [None if a is None or b is None or a != a or b != b else b - a
                               for a, b in zip(out["off"], out["on"])]
        return out

    def paired(self, a: str = "off", b: str = "on") -> pd.DataFrame:
        """One row per question (and seed) run in both modes ``a`` and ``b``: each side's id, outcome and
        correctness, and ``change``: ``fixed`` (b right, a wrong), ``broken`` (a right, b wrong) or ``same``."""
        df = self.records()
        cols = ["dataset", "question_id", "seed", "question", "golds", f"id_{a}", f"id_{b}", f"failure_{a}",
                f"failure_{b}", f"correct_{a}", f"correct_{b}", "change"]
        if df.empty:
            return pd.DataFrame(columns=cols)
        df = df.assign(seed=df["seed"].map(lambda x: "greedy" if x is None or x != x else str(x)),
                       correct=df["correct"].map(truthy))
        keep = ["dataset", "question_id", "seed", "id", "failure", "correct"]
        left = df[df["mode"] == a][keep + ["question", "golds"]]
        right = df[df["mode"] == b][keep]
        m = left.merge(right, on=["dataset", "question_id", "seed"], suffixes=(f"_{a}", f"_{b}"))
        m["change"] = ["fixed" if y and not x else "broken" if x and not y else "same"
                       for x, y in zip(m[f"correct_{a}"], m[f"correct_{b}"])]
        return m[cols].reset_index(drop=True)

    def skill_effects(self) -> pd.DataFrame:
        """Per skill retrieved in mode ``on``: how often it fired, and on those questions how often On was
        right where Off was wrong (``helped``) and the reverse (``hurt``), paired by dataset/id/seed."""
        df = self.records()
        df = df[df["status"] != "error"]
        seed = df["seed"].map(lambda x: "greedy" if x is None or x != x else str(x))
        df = df.assign(seed=seed, correct=df["correct"].map(truthy))
        off = {(r.dataset, r.question_id, r.seed): r.correct for r in df[df["mode"] == "off"].itertuples()}
        acc: dict[str, dict[str, Any]] = {}
        for r in df[df["mode"] == "on"].itertuples():
            base = off.get((r.dataset, r.question_id, r.seed))
            for sid in r.skill_ids:
                a = acc.setdefault(sid, {"skill_id": sid, "fired": 0, "on_correct": 0, "paired": 0, "helped": 0,
                                         "hurt": 0, "datasets": set()})
                a["fired"] += 1
                a["on_correct"] += r.correct
                a["datasets"].add(r.dataset)
                if base is not None:
                    a["paired"] += 1
                    a["helped"] += r.correct and not base
                    a["hurt"] += base and not r.correct
        rows = [{**a, "net": a["helped"] - a["hurt"], "datasets": ", ".join(sorted(a["datasets"]))} for a in acc.values()]
        cols = ["skill_id", "fired", "on_correct", "paired", "helped", "hurt", "net", "datasets"]
        out = pd.DataFrame(rows, columns=cols)
        return out.sort_values(["net", "fired"], ascending=False).reset_index(drop=True) if len(out) else out

    def skill_firing(self) -> pd.DataFrame:
        """Skill id x dataset: how many mode-``on`` questions had the skill in the prompt."""
        df = self.records(mode="on")
        pairs = [(sid, ds) for ids, ds in zip(df["skill_ids"], df["dataset"]) for sid in ids]
        if not pairs:
            return pd.DataFrame()
        t = pd.crosstab(pd.Series([p[0] for p in pairs], name="skill"), pd.Series([p[1] for p in pairs], name="dataset"))
        return t.loc[t.sum(axis=1).sort_values(ascending=False).index]


def eval_searches(r: dict[str, Any]) -> list[dict[str, Any]] | None:
    """An eval record's searches as ``[{query, docs}]``; ``docs`` is None where the record kept only the
    queries. (Records that keep documents may hold them as ``search_results`` or a list ``searches``.)"""
    for key in ("search_results", "searches"):
        v = r.get(key)
        if isinstance(v, list) and all(isinstance(s, dict) for s in v):
            return [{"query": s.get("query", ""), "docs": s.get("docs")} for s in v]
    queries = _as_list(r.get("queries"))
    return [{"query": q, "docs": None} for q in queries] if queries else []


def _find_bank(path: Path) -> Path | None:
    """A bank directory given it, a run directory, or ``<bank>@vN`` as eval records write it."""
    path = Path(str(path).split("@v")[0])
    for cand in (path, *(path / d for d in BANK_DIRS)):
        if (cand / "snapshots").is_dir() or (cand / "skills.jsonl").is_file():
            return cand
    return None


def _not_found(wanted: str, ids: list[str], where: str) -> str:
    import difflib

    close = difflib.get_close_matches(wanted, ids, n=5, cutoff=0.5) or ids[:5]
    return (f"no rollout {wanted!r} in {where} ({len(ids)} rollouts); "
            + (f"ids look like: {', '.join(close)}" if close else "it has none yet"))


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
        raise RunNotFoundError(f"{p} does not exist (expected a run directory runs/NAME or an eval directory "
                               "evals/NAME)")
    raise RunNotFoundError(f"{p} is neither a run directory (config.yaml is missing) nor an eval directory "
                           "(records.jsonl and eval.json are missing)")


def latest(root: str | Path, kind: str = "run") -> Path | None:
    """The most recently modified run (``kind='run'``) or eval directory under ``root``, or None."""
    root = Path(root)
    marker = ("config.yaml",) if kind == "run" else ("records.jsonl", "eval.json")
    if not root.is_dir():
        return None
    found = [p for p in root.iterdir() if p.is_dir() and any((p / m).is_file() for m in marker)]
    return max(found, key=lambda p: max(os.path.getmtime(p / m) for m in marker if (p / m).exists()), default=None)
