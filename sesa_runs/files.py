"""The rollout-frame schema, the failure taxonomy and the plain-file readers behind :mod:`sesa_runs.load`.

Kept apart so that :mod:`sesa_runs.load` (the public loading API, which re-exports what is public here)
stays small. Nothing here opens Chroma or touches a live process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from sesa_graph import statuses
from sesa_graph.fsutil import read_jsonl
from sesa_graph.memory.bank_layout import JOURNAL, BankNotFoundError
from sesa_graph.memory.snapshot import bank_dir, committed_view
from sesa_graph.scoring import contains_answer
from tools.errors import UserError

ROLES = ("proposer", "solver")
TOKEN_COLUMNS = ("prompt_ids", "completion_ids", "env_mask", "logprobs")
NUMERIC = ("reward", "success_rate", "score", "em", "f1")  # NaN stays NaN in these columns

COLUMNS = (
    "id",
    "role",
    "step",
    "question_id",
    "group_id",
    "sample",
    "dataset",
    "mode",
    "status",
    "error",
    "final",
    "question",
    "golds",
    "target",
    "hops",
    "skill_ids",
    "skill_bank_version",
    "valid",
    "invalid_reason",
    "correct",
    "reward",
    "score",
    "em",
    "f1",
    "judge_method",
    "judge_raw",
    "success_rate",
    "n_turns",
    "n_searches",
    "trainable",
    "selected",
    "reused",
    "policy_version",
    "failure",
    "gold_retrieved",
    "turns_json",
    "searches_json",
)
"""Columns of every rollout frame. ``golds``: the gold answers (a run's solver gold is its ``target``);
``reward``: the trained reward (an eval: the judge score); ``failure``: see :data:`FAILURE_KINDS`;
``gold_retrieved``: a gold answer occurs in a retrieved document (None when documents were not recorded)."""

FAILURE_KINDS = statuses.FAILURE_KINDS
"""The failure taxonomy of solver rollouts (``failure`` column; ``correct`` for successes, None for
proposers): kind -> description, from the one table :data:`sesa_graph.statuses.OUTCOMES`."""


class RunNotFoundError(UserError, FileNotFoundError):
    """A path that is not a run (or eval) directory; the message names what is missing."""


# ---- small readers ---------------------------------------------------------------------------------------


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing, unreadable, or not an object (a reader shows
    what the other files hold rather than fail on one damaged summary)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def missing(v: Any) -> bool:
    """None or NaN (how pandas fills a missing cell)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def as_list(v: Any) -> list:
    if missing(v):
        return []
    return [x for x in v] if not isinstance(v, str) else [v]


def loads(text: Any, default: Any) -> Any:
    if not isinstance(text, str) or not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def truthy(v: Any) -> bool:
    """A flag from a frame cell: None and NaN are False."""
    return not missing(v) and bool(v)


def docs_contain(searches: Sequence[dict[str, Any]] | None, golds: Sequence[str]) -> bool | None:
    """Whether any retrieved document (title or text) contains a gold answer; None if none were recorded."""
    if searches is None or any(s.get("docs") is None for s in searches):
        return None
    return any(
        contains_answer(d.get("title"), golds) or contains_answer(d.get("text"), golds)
        for s in searches
        for d in s.get("docs") or []
    )


def failure_kind(
    status: str | None, correct: Any, gold_retrieved: bool | None, error: str | None = None
) -> str:
    """``correct`` or one of :data:`FAILURE_KINDS` for one solver rollout."""
    if truthy(correct):
        return "correct"
    if status in statuses.FAILURE_STATUSES and status != "error":
        return status
    if status == "error":
        return "search_error" if (error or "").startswith("search_error") else "error"
    if gold_retrieved is None:
        return "wrong_retrieval_unknown"
    return "wrong_gold_retrieved" if gold_retrieved else "wrong_gold_not_retrieved"


def select(
    df: pd.DataFrame,
    *,
    role: str | None = None,
    status: str | Iterable[str] | None = None,
    dataset: str | Iterable[str] | None = None,
    mode: str | Iterable[str] | None = None,
    failure: str | Iterable[str] | None = None,
    skill: str | None = None,
    correct: bool | None = None,
    min_reward: float | None = None,
    max_reward: float | None = None,
    step: int | Iterable[int] | None = None,
    guided: bool | None = None,
) -> pd.DataFrame:
    """Rows of a rollout frame that match every filter given (a str filter may also be a list of values).

    ``skill``: that skill id was in the prompt; ``guided``: any skill was in the prompt (or none, False)."""
    mask = pd.Series(True, index=df.index)
    for col, want in (
        ("role", role),
        ("status", status),
        ("dataset", dataset),
        ("mode", mode),
        ("failure", failure),
        ("step", step),
    ):
        if want is not None:
            values = [want] if isinstance(want, (str, int)) else list(want)
            mask &= df[col].isin(values)
    if skill is not None:
        mask &= df["skill_ids"].map(lambda ids: skill in as_list(ids)).astype(bool)
    if guided is not None:
        mask &= df["skill_ids"].map(lambda ids: bool(len(as_list(ids))) == guided).astype(bool)
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
    for key, sub in [(None, df)] if by is None else list(df.groupby(by, sort=True)):
        counts = sub["failure"].value_counts()
        for kind in statuses.KIND_ORDER:
            if counts.get(kind, 0):
                rows.append(
                    ([key] if by else [])
                    + [
                        kind,
                        int(counts[kind]),
                        counts[kind] / len(sub),
                        statuses.OUTCOMES[kind].description,
                    ]
                )
    return pd.DataFrame(rows, columns=cols)


def rollout_frame(rows: list[dict[str, Any]], extra: Sequence[str] = ()) -> pd.DataFrame:
    cols = list(COLUMNS) + [c for c in extra if c not in COLUMNS]
    df = (
        pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    )
    return df


def skill_frame(skills: list[dict[str, Any]]) -> pd.DataFrame:
    cols = [
        "id",
        "category",
        "source",
        "seed",
        "created_step",
        "retrieved",
        "helpful",
        "hurt",
        "score",
        "description",
        "trigger",
        "avoid",
        "queries",
    ]
    rows = [{**s, "score": int(s.get("helpful", 0)) - int(s.get("hurt", 0))} for s in skills]
    return (
        pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    )


class BankFiles:
    """A skill bank's plain files: live skills, snapshots and their reports (never Chroma)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def _snap_paths(self) -> list[Path]:
        return sorted((self.path / "snapshots").glob("v[0-9]*.jsonl")) if self.path else []

    def live(self) -> list[dict[str, Any]]:
        if self.path is None:
            return []
        if (
            self.path / JOURNAL
        ).exists():  # mid-commit skills.jsonl may be half rewritten: the last finished state
            return [s.model_dump(mode="json") for s in committed_view(self.path).skills]
        live = read_jsonl(self.path / "skills.jsonl", missing_ok=True)
        if not live and self._snap_paths():
            live = read_jsonl(self._snap_paths()[-1])
        return live

    def snapshot(self, version: int) -> list[dict[str, Any]]:
        if self.path is None:
            return []
        return read_jsonl(self.path / "snapshots" / f"v{int(version):04d}.jsonl", missing_ok=True)

    def skill_texts(self, ids: Sequence[str], version: Any = None) -> list[dict[str, Any]]:
        """The skills with these ids as they were at bank ``version`` (else as they are now), in order, with
        today's counters (``evicted`` set when the bank no longer has one); unknown ids as ``{id}``."""
        live = {s["id"]: s for s in self.live()}
        found: dict[str, dict[str, Any]] = {}
        if not missing(version):
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
            skills = read_jsonl(p)
            ids = {s["id"] for s in skills}
            rep = read_json(p.with_name(p.stem + ".report.json")) or {}
            version = int(p.stem.lstrip("v"))
            rejected = rep.get("rejected") or {}
            rows.append(
                {
                    "version": version,
                    "step": rep.get("step", 0),
                    "n_skills": len(skills),
                    "n_seed": sum(1 for s in skills if s.get("seed")),
                    "admitted": len(ids - before) if before is not None else 0,
                    "evicted": len(before - ids) if before is not None else 0,
                    "admitted_ids": sorted(ids - before) if before is not None else [],
                    "evicted_ids": sorted(before - ids) if before is not None else [],
                    "rejected": sum(rejected.values()) if isinstance(rejected, dict) else int(rejected or 0),
                    "picked": rep.get("picked", 0),
                    "error": rep.get("error"),
                    "retrieved": sum(int(s.get("retrieved", 0)) for s in skills),
                    "helpful": sum(int(s.get("helpful", 0)) for s in skills),
                    "hurt": sum(int(s.get("hurt", 0)) for s in skills),
                }
            )
            before = ids
        cols = [
            "version",
            "step",
            "n_skills",
            "n_seed",
            "admitted",
            "evicted",
            "admitted_ids",
            "evicted_ids",
            "rejected",
            "picked",
            "error",
            "retrieved",
            "helpful",
            "hurt",
        ]
        return pd.DataFrame(rows, columns=cols)


def seed_key(x: Any) -> str:
    return "greedy" if missing(x) else str(x)


def eval_searches(r: dict[str, Any]) -> list[dict[str, Any]] | None:
    """An eval record's searches as ``[{query, docs}]``; ``docs`` is None where the record kept only the
    queries. (Records that keep documents may hold them as ``search_results`` or a list ``searches``.)"""
    for key in ("search_results", "searches"):
        v = r.get(key)
        if isinstance(v, list) and all(isinstance(s, dict) for s in v):
            return [{"query": s.get("query", ""), "docs": s.get("docs")} for s in v]
    queries = as_list(r.get("queries"))
    return [{"query": q, "docs": None} for q in queries] if queries else []


def find_bank(path: Path) -> Path | None:
    """:func:`sesa_graph.memory.snapshot.bank_dir` (a bank, a run directory holding one, or ``<bank>@vN``),
    or None where there is no bank."""
    try:
        return bank_dir(path)
    except BankNotFoundError:
        return None


def not_found(wanted: str, ids: list[str], where: str) -> str:
    import difflib

    close = difflib.get_close_matches(wanted, ids, n=5, cutoff=0.5) or ids[:5]
    return f"no rollout {wanted!r} in {where} ({len(ids)} rollouts); " + (
        f"ids look like: {', '.join(close)}" if close else "it has none yet"
    )
