"""One self-play step, from the targets it draws to the records it hands the orchestrator to commit.

:class:`SelfPlayStep` is built once per run. Its :meth:`~SelfPlayStep.run` draws the step's targets, runs
the self-play graph (``graphs.selfplay``) over them, refills the solver batch when too few proposals were
valid (earlier questions, else grounded bootstrap questions) and, with ``train.resample_groups``, runs more
groups when too few have reward variance. Only then are the step's records made, once, over every item it
ran, with one metrics line, and its solver groups selected for the trainer. The orchestrator commits them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from graphs.contexts import SelfPlayContext, recursion_limit
from graphs.selfplay import graph
from sesa_graph.config import RunConfig
from sesa_graph.corpus.targets import Target, cloze_question, sample_targets
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.rollout.judge import Judge
from sesa_graph.rollout.loop import turn_cap_cuts
from sesa_graph.scoring import normalize_answer
from sesa_graph.trajectory import Trajectory
from tools.backends import SearchBackend
from training.batch_groups import select_groups, variance_groups
from training.questions.synth import DEFAULT_MIX, PROPOSER_KINDS, Synthesizer
from training.reuse import ReusePool

log = logging.getLogger(__name__)

# the bootstrap asks the solver kinds that answer from what they find: no deliberate misses
BOOTSTRAP_MIX = {
    k: v for k, v in DEFAULT_MIX.items() if k not in PROPOSER_KINDS and not k.startswith(("retry", "giveup"))
}


@dataclass
class StepOutput:
    """Everything one self-play step produced."""

    items: list[dict[str, Any]]
    proposer: list[Trajectory]
    solver: list[Trajectory]
    """Every solver rollout of the step, ``selected`` marking the trainer's batch."""
    failures: list[dict[str, Any]]
    """Failed, well-formed solver rollouts that searched, with their evidence and group success rate (for
    the skill memory's queue, which keeps the frontier ones)."""
    outcomes: list[tuple[list[str], bool, str]]
    """(retrieved skill ids, correct, status) per solver rollout (for the bank's counters)."""
    metrics: dict[str, Any]
    fresh: list[dict[str, Any]]
    """The step's valid proposals as reuse-pool entries, added once the step's own picks are made."""


class SelfPlayStep:
    def __init__(
        self,
        cfg: RunConfig,
        ctx: SelfPlayContext,
        pool: list[Target],
        reuse: ReusePool,
        search: SearchBackend,
    ) -> None:
        self.cfg, self.ctx, self.pool, self.reuse, self.search = cfg, ctx, pool, reuse, search
        # reading the corpus takes a while: one synthesizer a run, reseeded each step
        # grounded questions are checked against the embedded corpus, through this run's own search; reading
        # the corpus takes a while, so one synthesizer serves the run, reseeded each step
        embedded = cfg.search.backend != "http" and cfg.search.corpus == "embedded"
        self.synth = Synthesizer(search) if embedded else None

    def run(
        self, step: int, bank_version: int | None = None, policy_versions: tuple[int, int] = (0, 0)
    ) -> StepOutput:
        cfg, tc = self.cfg, self.cfg.train
        targets = sample_targets(self.pool, tc.targets_per_step, step, cfg.seed)
        items = [
            {"item_id": f"{step}-{i}", "target": t.answer, "hops": t.hops, "examples": t.example}
            for i, t in enumerate(targets)
        ]
        finals = self._play(items)
        fresh = [
            {"question": o["proposal"]["final"], "target": it["target"], "hops": it.get("hops", 1)}
            for it, o in zip(items, finals)
            if o["proposal"].get("valid")
        ]
        asked = {f["question"] for f in fresh}
        need = tc.questions_per_step - len(fresh)
        if need > 0:
            refill = self._reuse_items(step, need, asked)
            items, finals = items + refill, finals + self._play(refill)
            asked |= {o["proposal"]["final"] for o in finals if o["proposal"].get("valid")}
        resampled = 0
        short = tc.questions_per_step - _variance_groups(finals, cfg.solver.group_size)
        if tc.resample_groups and short > 0:
            first = sum(1 for it in items if it.get("reuse_question"))
            extra = self._reuse_items(step, tc.resample_groups, asked, first=first, strict=False)
            if extra:
                items, finals = items + extra, finals + self._play(extra)
                resampled = len(extra)
        out = collect(items, finals, step, cfg.name, bank_version, policy_versions, self.ctx)
        out.fresh = fresh
        if resampled:
            out.metrics["resampled_groups"] = resampled
        out.solver = select_groups(
            out.solver, tc.questions_per_step, cfg.solver.group_size, prefer_variance=tc.resample_groups > 0
        )
        out.metrics["batch_frontier_groups"] = variance_groups(
            [t for t in out.solver if t.selected], cfg.solver.group_size
        )
        return out

    def _play(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return asyncio.run(play(items, self.ctx, self.cfg.train.rollout_concurrency))

    def _reuse_items(
        self, step: int, need: int, asked: set[str], first: int = 0, strict: bool = True
    ) -> list[dict[str, Any]]:
        """``need`` questions from earlier steps not already asked this step (grounded bootstrap questions
        when the pool runs short), as self-play items that skip the proposer; ids count on from ``first``.
        ``strict``: fewer than ``need`` is an error."""
        picks = self.reuse.pick(step, need, exclude=asked, strategy=self.cfg.train.reuse, seed=self.cfg.seed)
        if len(picks) < need:  # nothing valid yet: grounded questions synthesized from the corpus
            boot = self.bootstrap(step, need - len(picks), asked | {p["question"] for p in picks})
            self.reuse.add(step, boot)  # they may be asked again at later steps, like proposals
            picks += boot
        if len(picks) < need and strict:
            raise RuntimeError(
                f"step {step}: cannot fill the solver batch ({len(picks)} of {need} questions): no valid "
                "proposal yet, and no pool target gave a bootstrap question (the search backend returned no "
                "article titled as a drawn target, so no cloze question could be made)"
            )
        return [
            {
                "item_id": f"{step}-r{first + i}",
                "target": p["target"],
                "hops": p["hops"],
                "reuse_question": p["question"],
            }
            for i, p in enumerate(picks)
        ]

    def bootstrap(self, step: int, n: int, skip: set[str]) -> list[dict[str, Any]]:
        """Questions for the first steps of an untrained proposer, none of ``skip``: on the embedded corpus
        the grounded solver questions of ``training.questions`` (their search retrieves the answer's
        article); on any other corpus or search server, a cloze of the target's own article as the search
        backend returns it (never a pool row's example questions: they are about other answers)."""
        if self.synth is not None:
            # the same seed each call of a step, so a second call skips the first one's questions
            self.synth.reseed(self.cfg.seed * 1000 + step)
            out = []
            for ex in self.synth.generate(n + len(skip), BOOTSTRAP_MIX):
                if ex.question not in skip and len(out) < n:
                    skip = skip | {ex.question}
                    out.append({"question": ex.question, "target": ex.target, "hops": ex.hops})
            return out
        rng = random.Random(f"bootstrap:{self.cfg.seed}:{step}")
        out = []
        for t in rng.sample(self.pool, min(len(self.pool), 20 * n)):
            if len(out) == n:
                break
            q = self._cloze(t.answer)
            if q and q not in skip:
                skip = skip | {q}
                out.append({"question": q, "target": t.answer, "hops": 1})
        return out

    def _cloze(self, target: str) -> str | None:
        """A cloze question from the target's own article, found through the search backend (so a retrieval
        server works as well as a local index); None when its top hits hold no article of that title."""
        try:
            (docs,) = self.search.search([target], 3)
        except Exception as exc:  # noqa: BLE001 - a failed lookup only skips this target
            log.warning("bootstrap search for %r failed: %s", target, exc)
            return None
        doc = next((d for d in docs if normalize_answer(d.title) == normalize_answer(target)), None)
        return cloze_question(target, doc.text) if doc is not None else None


async def play(
    items: list[dict[str, Any]], ctx: SelfPlayContext, max_concurrency: int = 8
) -> list[dict[str, Any]]:
    """The self-play graph's final states for a batch of ``{"item_id", "target", "hops", ...}``."""
    for it in items:
        if not str(it.get("target", "")).strip():
            raise ValueError(f"self-play item {it.get('item_id')!r} has an empty target")
    return await graph.abatch(
        [dict(it, rollouts=[]) for it in items],
        config={"max_concurrency": max_concurrency, "recursion_limit": recursion_limit()},
        context=ctx,
    )


def _variance_groups(finals: list[dict[str, Any]], group_size: int) -> int:
    """``batch_groups.variance_groups`` of the rollouts these finals would make, before they are made."""
    rewards = [o["solver_rewards"] for o in finals if o["proposal"].get("valid")]
    return sum(1 for r in rewards if len(r) == group_size and len(set(r)) > 1)


def collect(
    items: list[dict[str, Any]],
    finals: list[dict[str, Any]],
    step: int,
    run: str,
    bank_version: int | None,
    policy_versions: tuple[int, int],
    ctx: SelfPlayContext,
) -> StepOutput:
    """Trajectories, outcomes, failure records and the metrics line of a step's finished items. Every
    wrong, answered rollout that searched is a failure record, with its group's success rate; the skill
    memory decides which of them it queues (``MemoryConfig.failure_source``)."""
    # the skill memory's own settings say how much of a failure's evidence its distiller gets to see
    mcfg = getattr(ctx.memory, "config", None)
    mcfg = mcfg if isinstance(mcfg, MemoryConfig) else MemoryConfig()
    proposer, solver, failures, outcomes = [], [], [], []
    reasons: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    for it, out in zip(items, finals):
        qid = str(it.get("item_id", it["target"]))
        prop = out["proposal"]
        question = prop.get("final") or ""
        reused = bool(prop.get("reused"))
        if not reused:
            proposer.append(
                Trajectory.from_state(
                    "proposer",
                    prop,
                    run=run,
                    step=step,
                    question_id=qid,
                    group_id=f"{step}:{qid}:p",
                    question=question,
                    target=it["target"],
                    hops=it.get("hops", 1),
                    valid=bool(prop.get("valid")),
                    invalid_reason=prop.get("invalid_reason"),
                    reward=out["proposer_reward"],
                    success_rate=out.get("success_rate"),
                    trainable=prop.get("status") != "search_error",
                    policy_version=policy_versions[0],
                )
            )
        if not prop.get("valid"):
            reasons[prop.get("invalid_reason") or "unknown"] += 1
            continue
        for r, v, rew in zip(
            sorted(out["rollouts"], key=lambda r: r["sample"]), out["verdicts"], out["solver_rewards"]
        ):
            statuses[r["status"]] += 1
            t = Trajectory.from_state(
                "solver",
                r,
                run=run,
                step=step,
                question_id=qid,
                group_id=f"{step}:{qid}:s",
                sample=r["sample"],
                question=question,
                target=it["target"],
                hops=it.get("hops", 1),
                skill_ids=out.get("skill_ids", []),
                skill_bank_version=bank_version,
                verdict_json=json.dumps(v),
                correct=v["correct"],
                reward=rew,
                success_rate=out["success_rate"],
                trainable=r["status"] != "search_error",
                reused=reused,
                policy_version=policy_versions[1],
            )
            solver.append(t)
            outcomes.append((t.skill_ids, bool(v["correct"]), t.status))
            if not v["correct"] and t.status == "answered" and t.n_searches > 0:
                failures.append(_failure(t, it["target"], out, mcfg.evidence_docs, mcfg.evidence_chars))
    metrics = step_metrics(step, finals, proposer, solver, reasons, statuses, ctx.judge)
    metrics["failures"] = len(failures)
    return StepOutput(list(finals), proposer, solver, failures, outcomes, metrics, [])


def failure_evidence(searches: list[dict[str, Any]], docs: int, chars: int) -> list[dict[str, str]]:
    """The first ``docs`` distinct documents a rollout retrieved, in order, text cut to ``chars``."""
    out: dict[str, dict[str, str]] = {}
    for s in searches:
        for d in s.get("docs", []):
            if len(out) >= docs:
                return list(out.values())
            key = d.get("id") or d.get("title", "")
            if key not in out:
                out[key] = {"title": d.get("title", ""), "text": d.get("text", "")[:chars]}
    return list(out.values())


def _failure(t: Trajectory, target: str, out: dict[str, Any], docs: int, chars: int) -> dict[str, Any]:
    """The failure record of a wrong, answered solver rollout that searched (what the distiller reads)."""
    return {
        "question": t.question,
        "answer": t.final,
        "golds": [target],
        "searches": [s["query"] for s in t.searches],
        "retrieved_skill_ids": t.skill_ids,
        "status": t.status,
        "correct": False,
        "step": t.step,
        "question_id": t.question_id,
        "evidence": failure_evidence(t.searches, docs, chars),
        "group_success_rate": out["success_rate"],
        "skill_similarity": out.get("skill_similarity"),
    }


def step_metrics(
    step: int,
    finals: list[dict[str, Any]],
    proposer: list[Trajectory],
    solver: list[Trajectory],
    reasons: Counter[str],
    statuses: Counter[str],
    judge: Judge,
) -> dict[str, Any]:
    """The step's metrics line (less the failure count): proposals, rewards, frontier groups, how solver
    rollouts ended, judge methods, hop counts, searches per proposal, turns cut by the turn cap. Reused and
    resampled groups count with the step's own."""
    valid = [o for o in finals if o["proposal"].get("valid") and not o["proposal"].get("reused")]
    rates = [
        o["success_rate"] for o in finals if o["proposal"].get("valid") and o.get("success_rate") is not None
    ]
    return {
        "step": step,
        "items": sum(1 for o in finals if not o["proposal"].get("reused")),
        "valid_proposals": len(valid),
        "valid_rate": len(valid) / max(len(proposer), 1),
        "reused_groups": sum(1 for o in finals if o["proposal"].get("reused")),
        "invalid_reasons": dict(reasons),
        "proposer_reward_mean": _mean([t.reward for t in proposer]),
        "solver_reward_mean": _mean([t.reward for t in solver]),
        "solver_success_rates": rates,
        "frontier_groups": sum(1 for p in rates if 0 < p < 1),
        "solver_status": dict(statuses),
        "search_errors": statuses.get("search_error", 0),
        # the judge counts over the run: read once the step's last group is judged
        "judge_unavailable": judge.unavailable_count,
        "judge_methods": dict(
            Counter(json.loads(t.verdict_json)["method"] for t in solver if t.verdict_json)
        ),
        "correct_by": correct_by(solver),
        "proposals_by_hops": _by_hops(proposer),
        "proposal_searches": dict(sorted(Counter(str(t.n_searches) for t in proposer).items())),
        # turns max_tokens_per_turn cut (each parses as unfinished and is wasted), per role
        "turns_cut_by_turn_cap": {
            "proposer": turn_cap_cuts([t.turns for t in proposer]),
            "solver": turn_cap_cuts([t.turns for t in solver]),
        },
    }


def correct_by(solver: list[Trajectory]) -> dict[str, int]:
    """How many solver rollouts were judged correct by each method ('exact', 'llm'): a reader sees at once
    when a model judge, not exact match, carries the solver's reward."""
    verdicts = (json.loads(t.verdict_json) for t in solver if t.verdict_json)
    return dict(Counter(v["method"] for v in verdicts if v.get("correct")))


def _by_hops(proposer: list[Trajectory]) -> dict[str, dict[str, int]]:
    """Valid and total proposals per hop count."""
    out: dict[str, dict[str, int]] = {}
    for t in proposer:
        row = out.setdefault(str(t.hops), {"valid": 0, "total": 0})
        row["valid"] += int(bool(t.valid))
        row["total"] += 1
    return dict(sorted(out.items()))


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None
