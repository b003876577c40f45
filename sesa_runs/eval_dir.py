"""An eval directory as a Python object (:class:`Eval`): records, traces, Off/On tables, skill effects.

Open one with :func:`sesa_runs.load.open_eval`; the module docstring of :mod:`sesa_runs.load` says what an
eval directory holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from sesa_eval.answerability import read_answerability
from sesa_eval.report import METRICS, aggregate, headline_modes
from sesa_graph.fsutil import read_jsonl
from sesa_runs.files import (
    BankFiles,
    RunNotFoundError,
    as_list,
    docs_contain,
    eval_searches,
    failure_kind,
    find_bank,
    missing,
    not_found,
    read_json,
    rollout_frame,
    seed_key,
    select,
    truthy,
)
from sesa_runs.trace import Trace


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
        rows = read_jsonl(self.path / "records.jsonl", missing_ok=True)
        self.torn_lines = rows.torn  # a record being written (or left torn by a kill) is skipped
        for r in rows:
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

    def answerability(self) -> pd.DataFrame:
        """One row per question of ``answerability.jsonl`` (:mod:`sesa_eval.answerability`): dataset, id,
        reach_question, reach_oracle, answerable and the answer-bearing doc's title (empty before it existed)."""
        rows = [
            {
                **{k: r.get(k) for k in ("dataset", "id", "reach_question", "reach_oracle", "answerable")},
                "doc_title": (r.get("doc") or {}).get("title"),
                "doc_via": (r.get("doc") or {}).get("via"),
            }
            for r in read_answerability(self.path).values()
        ]
        cols = ["dataset", "id", "reach_question", "reach_oracle", "answerable", "doc_title", "doc_via"]
        return pd.DataFrame(rows, columns=cols)

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
        mode, and ``on - off`` when both ran -- the cells of report.json's headline, computed by the same
        function (:func:`sesa_eval.report.aggregate`: records with status ``error`` left out, seeds averaged
        per seed first). ``metric``: a record field (score, em, f1) or a report metric (judge, em, f1)."""
        field = METRICS.get(metric, metric)
        recs = [
            r for r in self._records() if r.get("status") != "error" and r.get("mode") and r.get("dataset")
        ]
        modes = headline_modes({r["mode"] for r in recs})
        datasets = sorted({r["dataset"] for r in recs})
        cells = aggregate(recs, datasets, modes, field)
        rows = [
            {
                "dataset": ds,
                **{
                    k: v for m in modes for k, v in ((m, cells[m][ds]["mean"]), (f"n_{m}", cells[m][ds]["n"]))
                },
            }
            for ds in ([*datasets, "mean"] if datasets else [])
        ]
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
