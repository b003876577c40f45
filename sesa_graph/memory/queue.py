"""The pending-failure queue: failed, well-formed solver rollouts that used search, waiting to be distilled.

Failures of the same question (normalized text) merge into one entry whose ``failures`` count grows, so
a question every rollout of a group failed, or one that keeps failing across steps, ranks higher. The
priority is::

    guided_weight * [the failing rollout had skills in its prompt] + repeat_weight * (failures - 1)

with ties broken by recency. When the queue is over its cap the lowest-priority entry is dropped and
counted. A consolidation *picks* entries (they stay queued) and only removes the ones it consumed when
its result is committed, so failures that were not picked, or whose distillation errored, stay.

The queue is one JSON file, rewritten atomically on every change.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sesa_graph.fsutil import write_json_atomic
from sesa_graph.memory.utility import IGNORED_STATUSES

QUEUE_FORMAT = 1


class QueueError(RuntimeError):
    """A queue file that cannot be read; the message names the path."""


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


class PendingFailure(BaseModel):
    """A queue entry: the latest failing rollout of one question plus how often that question failed."""

    key: str
    record: FailureRecord
    failures: int = 1
    guided: bool = False
    first_step: int = 0
    last_step: int = 0
    seq: int = 0


def question_key(question: str) -> str:
    return " ".join(question.lower().split())


def skip_reason(record: FailureRecord) -> str | None:
    """Why a rollout does not belong in the queue (None when it does)."""
    if record.correct:
        return "correct"
    if record.status in IGNORED_STATUSES:
        return f"status_{record.status}"
    if not record.searches:
        return "no_search"
    return None


class FailureQueue:
    """Bounded, persisted priority queue of pending failures. Owned by the single bank writer."""

    def __init__(
        self, path: Path | None, cap: int = 300, guided_weight: float = 1.0, repeat_weight: float = 0.5
    ):
        self.path = Path(path) if path is not None else None
        self.cap = cap
        self.guided_weight = guided_weight
        self.repeat_weight = repeat_weight
        self.entries: dict[str, PendingFailure] = {}
        self.stats: Counter[str] = Counter()
        self._seq = 0

    # ---- persistence ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path, **kwargs) -> FailureQueue:
        q = cls(path, **kwargs)
        try:
            data = json.loads(Path(path).read_text())
            entries = [PendingFailure.model_validate(e) for e in data["entries"]]
            stats = Counter({str(k): int(v) for k, v in data.get("stats", {}).items()})
        except FileNotFoundError:
            raise QueueError(f"failure queue {path} is missing") from None
        except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as exc:
            raise QueueError(f"failure queue {path} is corrupt: {exc}") from None
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

    def priority(self, e: PendingFailure) -> float:
        return self.guided_weight * e.guided + self.repeat_weight * (e.failures - 1)

    def _rank(self, e: PendingFailure) -> tuple[float, int]:
        return (self.priority(e), e.seq)

    def add(self, records: Iterable[FailureRecord | dict], save: bool = True) -> dict[str, int]:
        """Queue failures (one step's batch); returns counts: added, merged, skipped_<reason>, dropped."""
        out: Counter[str] = Counter()
        for r in records:
            rec = r if isinstance(r, FailureRecord) else FailureRecord.model_validate(r)
            reason = skip_reason(rec)
            if reason:
                out[f"skipped_{reason}"] += 1
                continue
            self._seq += 1
            key = question_key(rec.question)
            guided = bool(rec.retrieved_skill_ids)
            old = self.entries.get(key)
            if old is None:
                self.entries[key] = PendingFailure(
                    key=key, record=rec, guided=guided, first_step=rec.step, last_step=rec.step, seq=self._seq
                )
                out["added"] += 1
            else:
                self.entries[key] = old.model_copy(
                    update={
                        "record": rec if guided or not old.guided else old.record,  # keep a guided example
                        "failures": old.failures + 1,
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
