"""``SkillMemory``: what the self-play step talks to -- the bank, the queue and the consolidator, by mode.

Per self-play step::

    hits = memory.retrieve(questions)                   # before the solver rollouts (one version per step)
    block = memory.render(hits[i])                      # into prompts.render_solver_user(question, block)
    ... rollouts record [s.id for s in hits[i]] and get judged ...
    memory.end_step(step, outcomes, failures)           # at the step boundary, which does, in order:
        memory.apply_outcomes(outcomes)                 #   credit counters (one batch)
        memory.add_failures(failures)                   #   queue failed, well-formed, searching rollouts
        memory.commit(step)                             #   apply a finished consolidation (version + 1)
        memory.maybe_consolidate(step)                  #   start the next one in the background if due

Modes: 'on' does all of it; 'static' retrieves and credits, never distils or evicts; 'placebo' returns
length-matched unrelated skills and records nothing; 'off' has no bank.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sesa_graph.memory.bank import SkillBank
from sesa_graph.memory.bank_layout import QUEUE, BankCorruptError
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.consolidation import ConsolidationResult, Consolidator
from sesa_graph.memory.distiller import DistillerError, distiller_kind
from sesa_graph.memory.placebo import placebo_for
from sesa_graph.memory.queue import FailureQueue, FailureRecord, QueueError, priority_settings
from sesa_graph.memory.skill import Skill, SkillReplay
from sesa_graph.memory.utility import Outcome, select_evictions

log = logging.getLogger(__name__)


def _check_distiller(config: MemoryConfig, distiller: Any) -> None:
    """Mode 'on' without a usable distiller is a start-up error, never a bank that silently stops growing."""
    if config.mode != "on":
        return
    if distiller is None:
        raise ValueError(
            "memory mode 'on' needs a distiller: pass a PolicyClient (the local policy or an "
            "OpenAI-compatible endpoint) or a langchain-core chat model; or set mode 'static' to run "
            "without distillation"
        )
    distiller_kind(distiller)  # TypeError for anything else, now rather than at the first consolidation


@dataclass
class CommitReport:
    """What a commit did (``version`` is None when nothing was committed because the distiller failed)."""

    step: int
    version: int | None
    admitted: list[str] = field(default_factory=list)
    evicted: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    picked: int = 0
    responses: int = 0
    still_queued: int = 0
    error: str | None = None
    rejected_examples: list[dict] = field(default_factory=list)
    """The first few rejected outputs: reason, question and the output's start (raw model text)."""


@dataclass
class StepReport:
    outcomes: dict[str, int]
    failures: dict[str, int]
    commit: CommitReport | None
    consolidation_started: bool


class SkillMemory:
    """The skill memory of one run. Make it with :meth:`create` or :meth:`open` (never confused)."""

    def __init__(
        self,
        config: MemoryConfig,
        bank: SkillBank | None,
        queue: FailureQueue | None,
        distiller: Any = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.config = config
        self.bank = bank
        self.queue = queue
        self.distiller = distiller
        # memory.replay: set by the run (it owns the solver and the judge); see replay_candidates
        self.replay: Callable[[list[tuple[Skill, FailureRecord]]], list[SkillReplay]] | None = None
        _check_distiller(config, distiller)
        self.consolidator = (
            Consolidator(bank, queue, distiller, config, loop)
            if config.mode == "on" and bank is not None and queue is not None
            else None
        )

    # ---- construction --------------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | Path | None,
        config: MemoryConfig | None = None,
        *,
        encoder: Any = None,
        distiller: Any = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> SkillMemory:
        """A new memory: a new bank at ``path`` with seeds + ``config.priming_files`` (mode 'off': no bank)."""
        config = config or MemoryConfig()
        if config.mode == "off":
            return cls(config, None, None)
        _check_distiller(config, distiller)  # before anything is written
        bank = SkillBank.create(Path(path), config, encoder)
        return cls._around(config, bank, distiller, loop)

    @classmethod
    def open(
        cls,
        path: str | Path | None,
        config: MemoryConfig | None = None,
        *,
        encoder: Any = None,
        distiller: Any = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> SkillMemory:
        """The memory of an earlier run at ``path``: bank, counters, queue, version and tombstones."""
        config = config or MemoryConfig()
        if config.mode == "off":
            return cls(config, None, None)
        _check_distiller(config, distiller)
        bank = SkillBank.open(Path(path), config, encoder)
        return cls._around(config, bank, distiller, loop)

    @classmethod
    def _around(
        cls, config: MemoryConfig, bank: SkillBank, distiller: Any, loop: asyncio.AbstractEventLoop | None
    ) -> SkillMemory:
        try:
            return cls(config, bank, cls._load_queue(bank), distiller, loop)
        except BaseException:
            bank.close()  # an open bank holds the writer lock: never leave it behind a failed start
            raise

    @staticmethod
    def _load_queue(bank: SkillBank) -> FailureQueue:
        c = bank.config
        try:
            return FailureQueue.load(bank.path / QUEUE, **priority_settings(c))
        except QueueError as exc:
            bank.close()
            raise BankCorruptError(f"skill bank {bank.path}: {exc}") from None

    def close(self) -> None:
        if self.consolidator is not None and self.consolidator.busy:
            log.warning(
                "closing the skill memory with a consolidation still running; its result is dropped and "
                "its failures stay queued"
            )
        if self.bank is not None:
            self.bank.close()

    # ---- per step --------------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.config.mode

    @property
    def version(self) -> int | None:
        return self.bank.version if self.bank is not None else None

    def retrieve(self, questions: Sequence[str], k: int | None = None) -> list[list[Skill]]:
        """Skills for each question's solver prompt (mode-aware; 'off' gives empty lists)."""
        return [[s for s, _ in hits] for hits in self.retrieve_scored(questions, k)]

    def retrieve_scored(
        self, questions: Sequence[str], k: int | None = None
    ) -> list[list[tuple[Skill, float | None]]]:
        """``retrieve`` with each skill's cosine similarity to its question (None for a placebo skill)."""
        if self.bank is None:
            return [[] for _ in questions]
        hits = self.bank.retrieve_scored(questions, k)
        if self.mode == "placebo":
            return [[(s, None) for s in placebo_for(q, [s for s, _ in h])] for q, h in zip(questions, hits)]
        return hits

    def render(self, skills: Sequence[Skill]) -> str:
        """The solver-prompt block for one question's skills ('' when there are none)."""
        return self.bank.render_for_prompt(skills) if self.bank is not None and skills else ""

    def shown(self, skills: Sequence[Skill]) -> list[Skill]:
        """The skills ``render`` puts in the prompt: the leading ones that fit ``render_max_chars`` (a skill
        that would overflow it is left out whole, and so are the ones after it). Only these are credited."""
        n = 0
        while n < len(skills) and self.render(skills[: n + 1]) != self.render(skills[:n]):
            n += 1
        return list(skills[:n])

    def apply_outcomes(self, outcomes: Iterable[Outcome | tuple], step: int | None = None) -> dict[str, int]:
        """Credit one step's judged rollouts (modes 'on' and 'static'; ignored otherwise), once per ``step``."""
        if self.bank is None or self.mode not in ("on", "static"):
            return {"ignored_mode": len(list(outcomes))}
        return self.bank.apply_outcomes(outcomes, step)

    def add_failures(self, records: Iterable[FailureRecord | dict]) -> dict[str, int]:
        """Queue one step's failed rollouts (mode 'on' only: the others never distil); with failure_source
        'frontier' only those of groups with 0 < p < 1 (the others count as skipped_not_frontier)."""
        if self.consolidator is None:
            return {"ignored_mode": len(list(records))}
        return self.queue.add(records, frontier_only=self.config.failure_source == "frontier")

    def consolidation_due(self, step: int) -> bool:
        return (
            self.consolidator is not None
            and not self.consolidator.busy
            and step > 0
            and step % self.config.consolidate_every == 0
            # [paper] at least 20 pending failures: failed rollouts, a question's repeats included
            and self.queue.pending_failures >= self.config.consolidate_min_pending
        )

    def maybe_consolidate(self, step: int, force: bool = False) -> bool:
        """Start a background consolidation if due (every ``consolidate_every`` steps with enough pending)."""
        if self.consolidator is None or not (force or self.consolidation_due(step)):
            return False
        return self.consolidator.start(step)

    def commit(self, step: int, wait: bool = False, timeout: float | None = None) -> CommitReport | None:
        """At a step boundary: apply a finished consolidation (None if none is finished, or with ``wait``
        after blocking for it). Evicts by the utility rules, admits, drops consumed failures from the
        queue and increments the version, all as one crash-safe commit.

        A pass whose distiller failed -- every call errored, or no response parsed -- commits nothing, keeps
        its failures queued and is returned with ``error`` set; after ``max_consecutive_distiller_errors``
        such passes in a row this raises.
        """
        if self.consolidator is None:
            return None
        res = self.consolidator.take(wait=wait, timeout=timeout)
        return None if res is None else self._commit(step, res)

    def _commit(self, step: int, res: ConsolidationResult) -> CommitReport:
        if res.failed:
            return self._record_failed_pass(step, res)
        return self._commit_pass(step, res)

    def _record_failed_pass(self, step: int, res: ConsolidationResult) -> CommitReport:
        """A pass whose distiller failed or gave nothing parseable: counted, its failures stay queued, and a
        streak of ``max_consecutive_distiller_errors`` stops the run with what to fix."""
        bank, queue, cfg = self.bank, self.queue, self.config
        streak = int(bank.state.get("consecutive_distiller_errors", 0)) + 1
        what = "distiller_unparseable" if res.unparseable else "distiller_errors"
        bank.record_stats({what: 1}, consecutive_distiller_errors=streak)
        log.error(
            "consolidation at step %s: the distiller %s (%s); %d failures stay queued",
            res.step,
            "gave no parseable output" if res.unparseable else "failed",
            res.error,
            len(queue),
        )
        if streak >= cfg.max_consecutive_distiller_errors:
            if res.unparseable:
                raise DistillerError(
                    f"the distiller's outputs were unparseable in {streak} consolidations in a row (last: "
                    f"{res.error}); the skill bank cannot grow -- a thinking chat template spends the "
                    "distiller's max tokens inside <think>: set distiller.chat_template_kwargs "
                    "{enable_thinking: false} (or raise memory.distiller_max_tokens), use a model that "
                    "follows the skill format, or set memory mode 'static'"
                )
            raise DistillerError(
                f"the distiller failed in {streak} consolidations in a row (last: {res.error}); "
                "the skill bank cannot grow -- fix the distiller endpoint or set memory mode "
                "'static'"
            )
        return CommitReport(
            step=step, version=None, picked=len(res.picked), still_queued=len(queue), error=res.error
        )

    def replay_candidates(self, res: ConsolidationResult) -> tuple[list[tuple[Skill, Any]], Counter[str]]:
        """memory.replay: each candidate's source failure solved again with it in the prompt, the evidence
        stored with it; under 'require' only those whose replay was right stay. Returns the candidates and
        the counts (replayed, replay_flipped, replay_no_flip)."""
        mode = self.config.replay
        pairs = [(s, res.sources[s.id]) for s, _ in res.admitted if s.id in res.sources]
        if mode == "off" or self.replay is None or not pairs:
            return res.admitted, Counter()
        evidence = dict(zip((s.id for s, _ in pairs), self.replay(pairs), strict=True))
        counts: Counter[str] = Counter(replayed=len(evidence))
        kept = []
        for skill, emb in res.admitted:
            proof = evidence.get(skill.id)
            if proof is not None:
                skill = skill.model_copy(update={"replay": proof})
                counts["replay_flipped"] += proof.correct
                if mode == "require" and not proof.correct:
                    counts["replay_no_flip"] += 1
                    continue
            kept.append((skill, emb))
        log.info(
            "replay check: %d of %d candidates answered their failure right",
            counts["replay_flipped"],
            len(evidence),
        )
        return kept, counts

    def _commit_pass(self, step: int, res: ConsolidationResult) -> CommitReport:
        """Admit the pass's candidates and the evictions they cause, drop its consumed failures from the
        queue, all in one bank version."""
        bank, queue, cfg = self.bank, self.queue, self.config
        if res.base_version != bank.version:
            raise RuntimeError(
                f"consolidation result is for bank version {res.base_version}, the bank is at "
                f"{bank.version}: only one consolidation may be in flight"
            )
        res.admitted, replay_counts = self.replay_candidates(res)
        candidates = {s.id: s for s, _ in res.admitted}
        evict = select_evictions(
            [*bank.skills(), *candidates.values()],
            min_retrieved=cfg.evict_min_retrieved,
            below_score=cfg.evict_below_score,
            cap=cfg.bank_cap,
        )
        admit = [
            (s.model_copy(update={"created_step": step}), e) for s, e in res.admitted if s.id not in evict
        ]
        rejected = Counter(res.rejected)
        rejected["replay_no_flip"] += replay_counts.pop("replay_no_flip", 0)
        rejected["over_capacity"] += len(candidates) - len(admit)
        evict = {sid: r for sid, r in evict.items() if sid not in candidates}
        queue.remove(res.consumed, save=False)
        stats = Counter(
            {
                "consolidations": 1,
                "admitted": len(admit),
                "picked": len(res.picked),
                "responses": res.responses,
            }
        )
        stats.update({f"rejected_{k}": v for k, v in rejected.items()})
        stats.update(replay_counts)
        stats.update(f"evicted_{r}" for r in evict.values())
        report = {
            **res.report(),
            "admitted": len(admit),
            "rejected": {k: v for k, v in rejected.items() if v},
            "evicted": evict,
            "queue_after": len(queue),
            **replay_counts,
        }
        version = bank.commit(
            step=step,
            admit=admit,
            evict=evict,
            files={queue.path: queue.to_json()},
            report=report,
            stats=dict(stats),
            state_fields={"consecutive_distiller_errors": 0},
        )
        log.info(
            "skill bank v%d at step %d: %d admitted, %d evicted, rejected %s",
            version,
            step,
            len(admit),
            len(evict),
            dict(rejected),
        )
        return CommitReport(
            step=step,
            version=version,
            admitted=[s.id for s, _ in admit],
            evicted=evict,
            rejected={k: v for k, v in rejected.items() if v},
            picked=len(res.picked),
            responses=res.responses,
            still_queued=len(queue),
            error=res.error,
            rejected_examples=res.rejected_examples,
        )

    def end_step(
        self,
        step: int,
        outcomes: Iterable[Outcome | tuple] = (),
        failures: Iterable[FailureRecord | dict] = (),
    ) -> StepReport:
        """Everything the step boundary needs, in order: credit, queue, commit, maybe start the next pass."""
        o = self.apply_outcomes(outcomes, step)
        f = self.add_failures(failures)
        c = self.commit(step)
        started = self.maybe_consolidate(step)
        return StepReport(outcomes=o, failures=f, commit=c, consolidation_started=started)
