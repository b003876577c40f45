"""The pending-failure queue: failed, well-formed solver rollouts that used search, waiting to be distilled.

Which failures enter: with ``frontier_only`` (``MemoryConfig.failure_source == "frontier"``, the default)
only those of groups with a success rate 0 < p < 1 -- some rollouts of the same question succeeded, so the
question is answerable with search and the distiller has a contrast to learn from. A group no rollout
solved (p = 0) is mostly a question that is too hard, ambiguous or wrong, and teaches nothing about
searching; it is counted as ``skipped_not_frontier``. A record without a rate (written before the field
existed) is kept: there is nothing to judge it by.

Failures of the same question (normalized text) merge into one entry that counts its failed rollouts
(``failures``, inside a group and across steps) and the distinct steps it failed in (``groups``). The
priority is::

    guided_weight * guided + frontier * (1 + repeat_weight * (failures - 1))

    guided   = 1 if a failing rollout had skills in its prompt (the bank's blind spots) whose best cosine
               similarity to the question reached ``guided_min_similarity`` (None: any shown skill counts),
               else 0. Retrieval returns the top k with no floor, so without this every failure of a run
               with a bank would be 'guided' and the term would order nothing.
    frontier = max over the entry's failures of 4 p (1 - p): 1 at p = 0.5, 0 at p = 0 or 1 or p unknown

so a frontier failure near p = 0.5, one that relevant skills did not prevent, and one that failed in more
rollouts rank higher. The repeat term is scaled by the frontier score, so the G failures of a p = 0 group
(mostly a bad question) add nothing. Ties go to the most recent. When the queue is over its cap the
lowest-priority entry is dropped and counted. ``pending_failures`` (failed rollouts, not questions) is what
the consolidation's minimum counts ([paper]: at least 20 pending failures). A consolidation *picks* entries
(they stay queued) and only removes the ones it consumed when its result is committed, so failures that
were not picked, or whose distillation errored, stay.

The queue is one JSON file, rewritten atomically on every change; entries and records written before
``groups``, ``frontier``, ``evidence`` and ``group_success_rate`` existed load with their defaults.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sesa_graph.fsutil import write_json_atomic
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.utility import IGNORED_STATUSES
from tools.errors import UserError

QUEUE_FORMAT = 1


class QueueError(UserError, RuntimeError):
    """A queue file that cannot be read; the message names the path."""


_QUEUE_FIX = (
    "it holds the failures waiting for distillation (each step's failures are also in the run's failures/ "
    "files). Restore it from a copy of the bank, or start an empty queue: "
    'echo \'{{"format": 1, "entries": []}}\' > {path}'
)


class FailureRecord(BaseModel):
    """One failed solver rollout, as the self-play step reports it (and as ``failures.jsonl`` stores it)."""

    model_config = ConfigDict(extra="ignore")

    question: str = Field(min_length=1, description="The question the solver failed.")
    answer: str | None = Field(None, description="The solver's final answer (None when it gave none).")
    golds: list[str] = Field(default_factory=list, description="Gold answers.")
    searches: list[str] = Field(default_factory=list, description="The search queries the rollout issued.")
    retrieved_skill_ids: list[str] = Field(
        default_factory=list, description="Skills that were in its prompt."
    )
    status: str = Field("answered", description="Rollout status: answered | max_turns | malformed | ...")
    correct: bool = Field(False, description="Judge verdict (True records are not failures and are skipped).")
    step: int = Field(0, ge=0, description="Self-play step.")
    question_id: str | None = Field(None, description="Id of the question in the run, if any.")
    evidence: list[dict[str, str]] = Field(
        default_factory=list,
        description="Distinct documents the rollout retrieved, in order ({'title', 'text'}, text cut to "
        "MemoryConfig.evidence_chars, at most evidence_docs of them): what its searches found.",
    )
    group_success_rate: float | None = Field(
        None, ge=0, le=1, description="Success rate p of the rollout's group (None: not recorded)."
    )
    skill_similarity: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Best cosine similarity between the question and the skills shown in its prompt (None: "
        "none shown, or not recorded -- then any shown skill makes it guided).",
    )


class PendingFailure(BaseModel):
    """A queue entry: the latest failing rollout of one question plus how often that question failed."""

    key: str
    record: FailureRecord
    failures: int = 1
    groups: int = 1
    """Distinct steps in which the question failed."""
    frontier: float = 0.0
    """Best 4 p (1 - p) among its failures' groups."""
    guided: bool = False
    first_step: int = 0
    last_step: int = 0
    seq: int = 0


def parse_queue(data: object, path: Path) -> tuple[list[PendingFailure], Counter[str]]:
    """The entries and statistics of a parsed queue file; QueueError naming the file, the entry and the
    field when it is not one."""

    def bad(problem: str) -> QueueError:
        return QueueError(f"failure queue {path} is damaged: {problem}; {_QUEUE_FIX.format(path=path)}")

    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise bad("expected a JSON object with an 'entries' list")
    entries = []
    for i, e in enumerate(data["entries"]):
        try:
            entries.append(PendingFailure.model_validate(e))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "the entry"
            raise bad(f"entry {i}: {where}: {err['msg']}") from None
    raw = data.get("stats", {})
    try:
        stats = Counter({str(k): int(v) for k, v in raw.items()})
    except (AttributeError, TypeError, ValueError):
        raise bad("'stats' must map names to integers") from None
    return entries, stats


def question_key(question: str) -> str:
    return " ".join(question.lower().split())


def frontier_score(p: float | None) -> float:
    """4 p (1 - p): 1 for a group half of whose rollouts succeeded, 0 when none or all did (or p unknown)."""
    return 0.0 if p is None else 4.0 * p * (1.0 - p)


def is_guided(record: FailureRecord, min_similarity: float | None) -> bool:
    """Skills were in the failing rollout's prompt and (with a floor) the best of them was relevant. A record
    without a similarity (written before the field existed) counts as guided: nothing to judge it by."""
    if not record.retrieved_skill_ids:
        return False
    sim = record.skill_similarity
    return min_similarity is None or sim is None or sim >= min_similarity


def priority_settings(config: MemoryConfig) -> dict[str, Any]:
    """The FailureQueue keyword arguments a memory config sets (one place for every queue a run builds)."""
    return {
        "cap": config.queue_cap,
        "guided_weight": config.priority_guided_weight,
        "repeat_weight": config.priority_repeat_weight,
        "guided_min_similarity": config.priority_guided_min_similarity,
    }


def skip_reason(record: FailureRecord, frontier_only: bool = False) -> str | None:
    """Why a rollout does not belong in the queue (None when it does)."""
    if record.correct:
        return "correct"
    if record.status in IGNORED_STATUSES:
        return f"status_{record.status}"
    if not record.searches:
        return "no_search"
    p = record.group_success_rate
    if frontier_only and p is not None and not 0.0 < p < 1.0:
        return "not_frontier"
    return None


class FailureQueue:
    """Bounded, persisted priority queue of pending failures. Owned by the single bank writer."""

    def __init__(
        self,
        path: Path | None,
        cap: int = 300,
        guided_weight: float = 1.0,
        repeat_weight: float = 0.5,
        guided_min_similarity: float | None = None,
    ):
        self.path = Path(path) if path is not None else None
        self.cap = cap
        self.guided_weight = guided_weight
        self.repeat_weight = repeat_weight
        self.guided_min_similarity = guided_min_similarity
        self.entries: dict[str, PendingFailure] = {}
        self.stats: Counter[str] = Counter()
        self._seq = 0

    # ---- persistence ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path, **kwargs) -> FailureQueue:
        q = cls(path, **kwargs)
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise QueueError(f"failure queue {path} is missing; {_QUEUE_FIX.format(path=path)}") from None
        except ValueError as exc:  # bad JSON or bad UTF-8
            raise QueueError(
                f"failure queue {path} is damaged: not valid JSON ({exc}); " + _QUEUE_FIX.format(path=path)
            ) from None
        entries, stats = parse_queue(data, path)
        q.entries = {e.key: e for e in entries}
        q.stats = stats
        q._seq = max((e.seq for e in entries), default=0)
        q._enforce_cap()
        return q

    def to_json(self) -> dict:
        return {
            "format": QUEUE_FORMAT,
            "entries": [e.model_dump(mode="json") for e in self.entries.values()],
            "stats": dict(self.stats),
        }

    def save(self) -> None:
        if self.path is not None:
            write_json_atomic(self.path, self.to_json())

    # ---- the queue --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.entries)

    @property
    def pending_failures(self) -> int:
        """Failed rollouts waiting, repeats of one question included (``len`` counts questions)."""
        return sum(e.failures for e in self.entries.values())

    def priority(self, e: PendingFailure) -> float:
        """See the module docstring."""
        return self.guided_weight * e.guided + e.frontier * (1.0 + self.repeat_weight * (e.failures - 1))

    def _rank(self, e: PendingFailure) -> tuple[float, int]:
        return (self.priority(e), e.seq)

    def add(
        self, records: Iterable[FailureRecord | dict], save: bool = True, frontier_only: bool = False
    ) -> dict[str, int]:
        """Queue failures (one step's batch); returns counts: added, merged, skipped_<reason>, dropped.
        ``frontier_only``: skip failures of groups with p = 0 or 1 (``skipped_not_frontier``)."""
        out: Counter[str] = Counter()
        for r in records:
            rec = r if isinstance(r, FailureRecord) else FailureRecord.model_validate(r)
            reason = skip_reason(rec, frontier_only)
            if reason:
                out[f"skipped_{reason}"] += 1
                continue
            self._seq += 1
            key = question_key(rec.question)
            guided = is_guided(rec, self.guided_min_similarity)
            frontier = frontier_score(rec.group_success_rate)
            old = self.entries.get(key)
            if old is None:
                self.entries[key] = PendingFailure(
                    key=key,
                    record=rec,
                    guided=guided,
                    frontier=frontier,
                    first_step=rec.step,
                    last_step=rec.step,
                    seq=self._seq,
                )
                out["added"] += 1
            else:
                self.entries[key] = old.model_copy(
                    update={
                        "record": rec if guided or not old.guided else old.record,  # keep a guided example
                        "failures": old.failures + 1,
                        # one step asks a question once: another step is another group
                        "groups": old.groups + (rec.step != old.last_step),
                        "frontier": max(old.frontier, frontier),
                        "guided": old.guided or guided,
                        "last_step": max(old.last_step, rec.step),
                        "seq": self._seq,
                    }
                )
                out["merged"] += 1
        out["dropped"] = self._enforce_cap()
        self.stats.update(out)
        if save:
            self.save()
        return dict(out)

    def _enforce_cap(self) -> int:
        over = len(self.entries) - self.cap
        if over <= 0:
            return 0
        for e in sorted(self.entries.values(), key=self._rank)[:over]:
            del self.entries[e.key]
        return over

    def pick(self, n: int) -> list[PendingFailure]:
        """The ``n`` highest-priority entries (they stay queued until ``remove``)."""
        return sorted(self.entries.values(), key=self._rank, reverse=True)[:n]

    def remove(self, keys: Iterable[str], save: bool = True) -> int:
        n = 0
        for k in keys:
            if self.entries.pop(k, None) is not None:
                n += 1
        self.stats["consumed"] += n
        if save:
            self.save()
        return n
