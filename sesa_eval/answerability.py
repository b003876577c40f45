"""Answerability: whether a benchmark question's gold answer is within the solver's reach at all.

An eval of a small corpus mostly measures the corpus: a question whose answer no search brings back
cannot be answered by any agent, so a score over all questions dilutes whatever the agent does. Per
question, with the eval's own search backend (bm25, dense or http: the one the rollouts use) and
``k`` = the solver's ``search_k``:

- ``reach_question``: a gold answer appears in the top-k documents retrieved for the question itself;
- ``reach_oracle``: a gold answer appears in the top-k documents retrieved for an *oracle query*, the
  question followed by a gold answer (one query for each of the first :data:`ORACLE_GOLDS` distinct
  golds). The question plus its answer, not the answer alone: the answer alone ranks any document that
  names it (every article mentioning "Paris" for a question about where someone was born), which only
  tells whether the string is in the corpus; with the question's words as well, the top documents are the
  ones that hold the answer *in the question's context*, i.e. what a searcher who phrased the right query
  would find;
- ``answerable`` = either.

"Appears" is the eval's own notion of a retrieved answer, :func:`sesa_graph.scoring.contains_answer`
(normalized, whole words), over a document as the solver sees it: its title and the first
``doc_chars`` characters of its text (an answer past the cut is never shown to the solver).

The first document that holds a gold answer (the question's hits in rank order, then the oracle
queries') is kept as the question's *answer-bearing document*: the open-book control (mode ``oracle``)
hands it to the solver. Rows are computed once per question and appended to
``evals/<name>/answerability.jsonl`` (keyed ``dataset/id``); the eval's settings file already pins the
search backend, corpus, ``search_k`` and ``doc_chars``, so a cached row stays valid for as long as the
eval's records do. A search that fails leaves its questions without a row (unknown, not unanswerable);
the next invocation tries them again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sesa_eval.datasets import EvalQuestion
from sesa_eval.records import ANSWERABILITY
from sesa_graph.fsutil import read_jsonl
from sesa_graph.scoring import contains_answer

log = logging.getLogger(__name__)

ORACLE_GOLDS = 3  # TriviaQA lists dozens of aliases; the first few are the canonical ones
BATCH = 64  # questions per search call (one call holds 1 + up to ORACLE_GOLDS queries per question)


def question_key(dataset: str, qid: str) -> str:
    return f"{dataset}/{qid}"


def oracle_queries(q: EvalQuestion) -> list[str]:
    """The question followed by each of its first :data:`ORACLE_GOLDS` distinct gold answers."""
    golds = list(dict.fromkeys(g.strip() for g in q.golds if g and g.strip()))[:ORACLE_GOLDS]
    return [f"{q.question} {g}" for g in golds]


def _shown(doc: Any, doc_chars: int) -> dict[str, Any]:
    return {"id": str(doc.id), "title": doc.title, "text": doc.text[:doc_chars]}


def _bearing(docs: Sequence[dict[str, Any]], golds: Sequence[str]) -> dict[str, Any] | None:
    return next((d for d in docs if contains_answer(f"{d['title']} {d['text']}", golds)), None)


def reach_rows(
    questions: Sequence[EvalQuestion], search: Any, k: int, doc_chars: int
) -> list[dict[str, Any]]:
    """One answerability row per question (one batched search call for all of them; raises if it fails)."""
    queries: list[str] = []
    spans: list[tuple[int, int]] = []
    for q in questions:
        start = len(queries)
        queries += [q.question, *oracle_queries(q)]
        spans.append((start, len(queries)))
    hits = search.search(queries, k) if queries else []
    rows = []
    for q, (start, end) in zip(questions, spans, strict=True):
        own = [_shown(d, doc_chars) for d in hits[start]]
        oracle = [_shown(d, doc_chars) for docs in hits[start + 1 : end] for d in docs]
        golds = list(q.golds)
        by_question, by_oracle = _bearing(own, golds), _bearing(oracle, golds)
        doc = by_question or by_oracle
        rows.append(
            {
                "key": question_key(q.dataset, q.id),
                "dataset": q.dataset,
                "id": q.id,
                "reach_question": by_question is not None,
                "reach_oracle": by_oracle is not None,
                "answerable": doc is not None,
                "doc": {**doc, "via": "question" if by_question else "oracle"} if doc else None,
                "k": k,
            }
        )
    return rows


def read_answerability(eval_dir: Path) -> dict[str, dict[str, Any]]:
    """``dataset/id`` -> its row, from ``eval_dir/answerability.jsonl`` ({} when there is none)."""
    rows = read_jsonl(Path(eval_dir) / ANSWERABILITY, missing_ok=True)
    return {r["key"]: r for r in rows if "key" in r}


def _append(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        f.flush()
        os.fsync(f.fileno())


async def ensure_answerability(
    questions: Sequence[EvalQuestion],
    search: Any,
    k: int,
    doc_chars: int,
    out_dir: Path,
) -> dict[str, dict[str, Any]]:
    """Every question's row: cached ones read back, the missing ones computed (``search`` is called only
    for those) and appended batch by batch. A failed batch is logged and left unknown."""
    path = Path(out_dir) / ANSWERABILITY
    have = read_answerability(out_dir)
    todo = [q for q in questions if question_key(q.dataset, q.id) not in have]
    failed = 0
    for i in range(0, len(todo), BATCH):
        batch = todo[i : i + BATCH]
        try:
            rows = await asyncio.to_thread(reach_rows, batch, search, k, doc_chars)
        except Exception as exc:  # noqa: BLE001 -- unknown, not unanswerable: tried again on resume
            failed += len(batch)
            log.warning(
                "answerability search failed for %d question(s): %s: %s", len(batch), type(exc).__name__, exc
            )
            continue
        _append(path, rows)
        have.update((r["key"], r) for r in rows)
    if failed:
        log.warning("%s: answerability unknown for %d question(s); rerun to try again", path, failed)
    return {
        question_key(q.dataset, q.id): have[question_key(q.dataset, q.id)]
        for q in questions
        if question_key(q.dataset, q.id) in have
    }


def answerable_keys(rows: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The ``dataset/id`` keys of the answerable questions."""
    return {key for key, r in rows.items() if r.get("answerable")}


def summary(
    rows: Mapping[str, Mapping[str, Any]], data: Mapping[str, Sequence[EvalQuestion]]
) -> dict[str, dict[str, int]]:
    """Per dataset and ``"all"``: questions, known rows, reach_question, reach_oracle, answerable counts."""
    out: dict[str, dict[str, int]] = {}
    total = {"n": 0, "known": 0, "reach_question": 0, "reach_oracle": 0, "answerable": 0}
    for ds, qs in data.items():
        rs = [rows[k] for q in qs if (k := question_key(ds, q.id)) in rows]
        cell = {
            "n": len(qs),
            "known": len(rs),
            "reach_question": sum(bool(r["reach_question"]) for r in rs),
            "reach_oracle": sum(bool(r["reach_oracle"]) for r in rs),
            "answerable": sum(bool(r["answerable"]) for r in rs),
        }
        out[ds] = cell
        for f in total:
            total[f] += cell[f]
    out["all"] = total
    return out
