"""Consolidation: distil picked failures into candidate skills, in a background thread.

One pass (``distill_pass``, shared with ``sesa bank mine``):

1. for each picked failure, show the distiller the question, gold and given answer, the searches, and
   the skills that were retrieved for it and did not help, and ask what they missed;
2. parse each completion defensively and run the candidate checks (``skill_checks.check_candidate``);
3. embed the survivors in one batch and admit a candidate only if its cosine similarity is
   <= ``admit_max_cosine`` to every bank skill, every live tombstone and every candidate admitted
   earlier in the same pass.

The :class:`Consolidator` runs a pass in a daemon thread against a *snapshot* of the bank taken when it
starts, so rollouts keep reading the bank untouched; nothing is written until ``SkillMemory.commit`` applies
the finished result at a step boundary (the bank version then increments). A failure whose completion
came back is *consumed* (removed from the queue at commit, admitted or not); a failure whose distiller
call errored stays queued; failures that were not picked are never touched.

The distiller coroutine runs on the thread's own event loop, unless ``loop`` is given: then it is
scheduled on that loop (use this when the distiller client is also used by the caller's loop, e.g. the
local policy or an ``OpenAIPolicy`` shared with the judge -- such clients must not be driven from two
event loops).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sesa_graph.memory.bank import SkillBank, max_cosine
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.distiller import build_messages, call_distiller, parse_skill_output
from sesa_graph.memory.queue import FailureQueue, FailureRecord, PendingFailure
from sesa_graph.memory.skill import Skill
from sesa_graph.memory.skill_checks import check_candidate

MAX_EXAMPLES = 5


@dataclass
class ConsolidationResult:
    """What one pass produced; nothing of it is in the bank until it is committed."""

    step: int
    base_version: int
    picked: list[str] = field(default_factory=list)
    consumed: list[str] = field(default_factory=list)
    errored: list[str] = field(default_factory=list)
    admitted: list[tuple[Skill, np.ndarray]] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    rejected_examples: list[dict] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    sources: dict[str, FailureRecord] = field(default_factory=dict)
    """Each candidate's source failure, by skill id (what the replay check solves again)."""

    @property
    def responses(self) -> int:
        return len(self.consumed)

    @property
    def unparseable(self) -> bool:
        """Responses came back but not one could be parsed (e.g. a thinking chat template that spent the
        distiller's token budget inside <think>): as useless as a dead distiller."""
        return bool(self.consumed) and self.rejected.get("unparseable", 0) == len(self.consumed)

    @property
    def failed(self) -> bool:
        """The distiller errored on every picked failure, or none of its responses parsed: nothing to
        commit, all stay queued (a fixed distiller may distil them later)."""
        return (bool(self.errored) and not self.consumed) or self.unparseable

    def report(self) -> dict:
        return {
            "step": self.step,
            "base_version": self.base_version,
            "picked": len(self.picked),
            "responses": self.responses,
            "distiller_errors": len(self.errored),
            "error": self.error,
            "admitted": len(self.admitted),
            "rejected": dict(self.rejected),
            "seconds": round(self.seconds, 3),
            "admitted_skills": [s.model_dump(mode="json") for s, _ in self.admitted[:MAX_EXAMPLES]],
            "rejected_examples": self.rejected_examples,
        }


async def distill_pass(
    failures: Sequence[PendingFailure],
    bank_skills: dict[str, Skill],
    bank_matrix: np.ndarray,
    tomb_matrix: np.ndarray,
    client: Any,
    encoder: Any,
    config: MemoryConfig,
    step: int,
    base_version: int = 0,
    source: str = "distilled",
) -> ConsolidationResult:
    """Distil ``failures`` into admitted candidates (see the module docstring). Never raises on model output."""
    t0 = time.perf_counter()
    res = ConsolidationResult(step=step, base_version=base_version, picked=[f.key for f in failures])
    conversations = []
    for f in failures:
        unhelpful = [bank_skills[i] for i in dict.fromkeys(f.record.retrieved_skill_ids) if i in bank_skills]
        conversations.append(build_messages(f, unhelpful, config.distiller_view))
    outputs = await call_distiller(client, conversations, config)

    candidates: list[Skill] = []
    for f, out in zip(failures, outputs):
        if isinstance(out, BaseException):
            res.errored.append(f.key)
            res.error = res.error or f"{type(out).__name__}: {out}"
            continue
        res.consumed.append(f.key)
        skill, reason = check_candidate(parse_skill_output(out), f, config, step, source=source)
        if skill is None:
            res.rejected[reason] += 1
            if len(res.rejected_examples) < MAX_EXAMPLES:
                res.rejected_examples.append(
                    {"reason": reason, "question": f.record.question, "output": out[:600]}
                )
        else:
            candidates.append(skill)
            res.sources[skill.id] = f.record
    if res.unparseable:
        first = next(o for o in outputs if not isinstance(o, BaseException))
        res.error = (
            f"all {len(res.consumed)} distiller outputs were unparseable"
            + (f" ({len(res.errored)} more calls failed: {res.error})" if res.errored else "")
            + f"; first: {str(first)[:200]!r}"
        )
    elif res.errored and res.consumed:
        res.error = f"{len(res.errored)} of {len(failures)} distiller calls failed; first: {res.error}"

    embs = encoder.encode_documents([c.embed_text() for c in candidates]) if candidates else []
    limit = config.admit_max_cosine
    for c, e in zip(candidates, embs):
        admitted = np.array([a for _, a in res.admitted], np.float32)
        if c.id in bank_skills or max_cosine(e, bank_matrix) > limit:
            res.rejected["duplicate_bank"] += 1
        elif max_cosine(e, tomb_matrix) > limit:
            res.rejected["tombstoned"] += 1
        elif any(c.id == a.id for a, _ in res.admitted) or max_cosine(e, admitted) > limit:
            res.rejected["duplicate_pass"] += 1
        else:
            res.admitted.append((c, np.asarray(e, np.float32)))
    res.seconds = time.perf_counter() - t0
    return res


class Consolidator:
    """Runs at most one consolidation pass at a time in a background thread; hands back its result."""

    def __init__(
        self,
        bank: SkillBank,
        queue: FailureQueue,
        client: Any,
        config: MemoryConfig,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.bank = bank
        self.queue = queue
        self.client = client
        self.config = config
        self.loop = loop
        self._thread: threading.Thread | None = None
        self._result: ConsolidationResult | None = None

    @property
    def busy(self) -> bool:
        """A pass is running or its result has not been taken yet."""
        return self._thread is not None

    @property
    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    def start(self, step: int) -> bool:
        """Start a pass over the top ``max_distill_per_pass`` pending failures; False if one is busy."""
        if self.busy:
            return False
        picked = [f.model_copy(deep=True) for f in self.queue.pick(self.config.max_distill_per_pass)]
        skills, matrix, tombs = self.bank.embedding_snapshot(step)
        version = self.bank.version
        encoder = self.bank.encoder

        def run() -> None:
            coro_args = (picked, skills, matrix, tombs, self.client, encoder, self.config, step, version)
            try:
                if self.loop is None:
                    self._result = asyncio.run(distill_pass(*coro_args))
                else:
                    self._result = asyncio.run_coroutine_threadsafe(
                        distill_pass(*coro_args), self.loop
                    ).result()
            except BaseException as exc:  # noqa: BLE001 -- reported through the result, failures stay queued
                self._result = ConsolidationResult(
                    step=step,
                    base_version=version,
                    picked=[f.key for f in picked],
                    errored=[f.key for f in picked],
                    error=f"{type(exc).__name__}: {exc}",
                )

        self._result = None
        self._thread = threading.Thread(target=run, name=f"sesa-consolidation-{step}", daemon=True)
        self._thread.start()
        return True

    def take(self, wait: bool = False, timeout: float | None = None) -> ConsolidationResult | None:
        """The finished result (and the consolidator is free again), or None if none is ready.

        ``wait`` blocks until the pass ends; do not wait from the thread that runs ``loop``.
        """
        if self._thread is None:
            return None
        if wait:
            if self.loop is not None and self.loop.is_running() and _running_loop() is self.loop:
                raise RuntimeError(
                    "waiting for a consolidation from the event loop that runs its distiller would "
                    "deadlock; call commit(wait=False) at each step boundary instead"
                )
            self._thread.join(timeout)
        if self._thread.is_alive():
            return None
        self._thread = None
        result, self._result = self._result, None
        return result


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
