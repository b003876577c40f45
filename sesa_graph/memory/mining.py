"""``sesa bank mine RUN``: candidate skills from the failures of an early (bootstrap) run -> a priming file.

Reads ``RUN/failures/step-NNNNNN.jsonl`` (what ``sesa train`` writes each step, in every memory mode) or one
JSONL file, one failed solver rollout per line (the ``FailureRecord`` fields)::

    {"question": "...", "answer": "..." | null, "golds": ["..."], "searches": ["q1", "q2"],
     "retrieved_skill_ids": ["seed-..."], "status": "answered", "correct": false, "step": 3,
     "question_id": "..."}

Correct, malformed and search-free records are skipped; repeats of a question merge (and rank higher).
The top ``max_failures`` by queue priority go through the same distillation and checks as a
consolidation, deduplicated against the seeds (and any ``against`` files) and each other at
``admit_max_cosine``; the admitted ones are written as a priming YAML (source: mined). The paper primes
with 15 seeds + 142 mined = 157 skills.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from sesa_graph.fsutil import JsonlError, read_jsonl
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.consolidation import ConsolidationResult, distill_pass
from sesa_graph.memory.queue import FailureQueue, FailureRecord, priority_settings
from sesa_graph.memory.skill import Skill, load_seeds, load_skill_file, write_skill_file

FAILURES_DIR = "failures"
FAILURES_FILE = "failures.jsonl"  # a single file of records, e.g. gathered by hand


def failures_path(run_dir: Path, step: int) -> Path:
    """Where a training run keeps one step's failure records."""
    return Path(run_dir) / FAILURES_DIR / f"step-{step:06d}.jsonl"


def read_failures(path: str | Path) -> list[FailureRecord]:
    """Failure records of a run directory (its per-step files, else a ``failures.jsonl`` in it) or of a
    JSONL file."""
    path = Path(path)
    if path.is_dir():
        files = sorted((path / FAILURES_DIR).glob("step-*.jsonl")) or [path / FAILURES_FILE]
    else:
        files = [path]
    if not files[0].is_file():
        raise FileNotFoundError(
            f"no failure records in {path} (expected {path / FAILURES_DIR}/step-*.jsonl, written by `sesa train`)"
        )
    out = []
    for file in files:
        for n, row in enumerate(read_jsonl(file), 1):
            try:
                out.append(FailureRecord.model_validate(row))
            except ValidationError as exc:
                raise JsonlError(
                    f"{file}: record {n}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
                ) from None
    return out


def mine(
    records: list[FailureRecord],
    distiller: Any,
    encoder: Any,
    config: MemoryConfig | None = None,
    *,
    max_failures: int = 200,
    against: list[Skill] | None = None,
) -> ConsolidationResult:
    """Distil the top ``max_failures`` failures into skills that are not near-duplicates of ``against``
    (default: the seeds) or of each other."""
    config = config or MemoryConfig()
    queue = FailureQueue(None, **{**priority_settings(config), "cap": max(len(records), 1)})
    queue.add(records, frontier_only=config.failure_source == "frontier")
    against = load_seeds(config.seeds_file)[1] if against is None else against
    matrix = (
        encoder.encode_documents([s.embed_text() for s in against])
        if against
        else np.zeros((0, 1), np.float32)
    )
    return asyncio.run(
        distill_pass(
            queue.pick(max_failures),
            {s.id: s for s in against},
            matrix,
            np.zeros((0, matrix.shape[1]), np.float32),
            distiller,
            encoder,
            config,
            step=0,
            source="mined",
        )
    )


def mine_run(
    run: str | Path,
    out: str | Path,
    distiller: Any,
    encoder: Any,
    config: MemoryConfig | None = None,
    *,
    max_failures: int = 200,
    against_files: list[Path] | None = None,
    keep: int | None = None,
) -> ConsolidationResult:
    """``mine`` over ``run``'s failure records, writing the admitted skills to the priming file ``out``;
    ``keep`` caps how many (in priority order; the paper primes with 142 mined skills)."""
    config = config or MemoryConfig()
    against = load_seeds(config.seeds_file)[1]
    for f in against_files or []:
        against += load_skill_file(f)[1]
    res = mine(read_failures(run), distiller, encoder, config, max_failures=max_failures, against=against)
    if keep is not None and len(res.admitted) > keep:
        res.rejected["over_keep"] += len(res.admitted) - keep
        res.admitted = res.admitted[:keep]
    write_skill_file(
        out,
        [s for s, _ in res.admitted],
        version=1,
        source="mined",
        note=f"mined from {run} ({res.responses} failures distilled, {len(res.admitted)} admitted)",
    )
    return res
