"""The self-play orchestrator: per step, wait for both trainers, run the self-play step graph against the
two rollout policies, apply the skill-memory lifecycle, and commit both roles' trajectories.

It is the skill bank's single writer. On CPU its rollout policies are local and reload the weights each
trainer publishes (``training.sync``); a step is committed only after its shards, the memory's step
boundary and the metrics line are written, so ``--resume`` restarts at the first uncommitted step.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from graphs.propose import ProposeContext
from graphs.selfplay import SelfPlayContext, StepOutput, run_step
from sesa_graph.config import RunConfig
from sesa_graph.fsutil import write_json_atomic
from sesa_graph.memory.memory import SkillMemory
from sesa_graph.nodes.agent_loop import RolloutContext, proposer_spec, solver_spec
from sesa_graph.policy.factory import make_judge, make_policy
from sesa_graph.targets import bootstrap_question, load_pool, sample_targets
from sesa_graph.trajectory import Trajectory
from tools.backends import make_backend
from training.store import TrajectoryStore
from training.sync import SyncDir

log = logging.getLogger(__name__)


@dataclass
class StepSummary:
    step: int
    metrics: dict[str, Any]
    seconds: float
    consolidation: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Orchestrator:
    def __init__(self, cfg: RunConfig, run_dir: str | Path, resume: bool = False) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.store = TrajectoryStore(run_dir)
        self.sync = SyncDir(run_dir)
        self.search = make_backend(cfg.search)
        self.solver_policy = make_policy(cfg.solver_policy)
        self.proposer_policy = make_policy(cfg.proposer_policy)
        self.judge = make_judge(cfg.judge, self.solver_policy, tokenizer=cfg.solver_policy.train_model)
        bank_dir = self.run_dir / "bank"
        opener = SkillMemory.open if resume and bank_dir.exists() else SkillMemory.create
        self.memory = opener(bank_dir, cfg.memory, distiller=self.solver_policy if cfg.memory.mode == "on" else None)
        self.pool = load_pool(cfg.train.target_pool, cfg.train.max_hops, cfg.seed)
        self.reuse_path = self.run_dir / "reuse_pool.json"
        self.reuse: list[dict[str, Any]] = json.loads(self.reuse_path.read_text()) if self.reuse_path.exists() else []
        self.versions = {"proposer": 0, "solver": 0}
        pc = cfg.proposer
        self.ctx = SelfPlayContext(
            proposer=ProposeContext(self.proposer_policy, self.search, proposer_spec(pc, cfg.solver.search_k,
                                    cfg.solver.doc_chars), seed=cfg.seed, checks=pc, judge=self.solver_policy),
            solver=RolloutContext(self.solver_policy, self.search, solver_spec(cfg.solver), seed=None),
            judge=self.judge, group_size=cfg.solver.group_size, rewards=cfg.rewards,
            memory=self.memory if cfg.memory.mode != "off" else None,
        )

    # ---- weights ------------------------------------------------------------------------------------
    def sync_weights(self) -> None:
        for role, policy in (("proposer", self.proposer_policy), ("solver", self.solver_policy)):
            v = self.sync.weights_version(role)
            if v is not None and v != self.versions[role] and hasattr(policy, "reload"):
                policy.reload(self.sync.weights_dir(role))
                self.versions[role] = v

    # ---- one step -----------------------------------------------------------------------------------
    def run_step(self, step: int) -> StepSummary:
        t0 = time.perf_counter()
        cfg = self.cfg
        targets = sample_targets(self.pool, cfg.train.targets_per_step, step, cfg.seed)
        items = [{"item_id": f"{step}-{i}", "target": t.answer, "hops": t.hops} for i, t in enumerate(targets)]
        common = dict(step=step, run=cfg.name, max_concurrency=cfg.train.rollout_concurrency,
                      bank_version=self.memory.version, policy_versions=(self.versions["proposer"], self.versions["solver"]))
        out = asyncio.run(run_step(items, self.ctx, **common))
        valid = [t for t in out.proposer if t.valid]
        for t in valid:
            self.reuse.append({"question": t.question, "target": t.target, "hops": t.hops})
        need = cfg.train.questions_per_step - len(valid)
        if need > 0:
            extra = asyncio.run(run_step(self._reuse_items(step, need), self.ctx, **common))
            out = _merge(out, extra)
        solver = _select_groups(out.solver, cfg.train.questions_per_step, cfg.solver.group_size)
        self.store.write(step, "proposer", out.proposer)
        self.store.write(step, "solver", solver)
        report = self.memory.end_step(step, out.outcomes, out.failures) if cfg.memory.mode != "off" else None
        write_json_atomic(self.reuse_path, self.reuse[-500:])
        metrics = dict(out.metrics)
        metrics.update(self._memory_metrics(report), seconds=round(time.perf_counter() - t0, 2),
                       policy_versions=dict(self.versions), time=time.time())
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
        self.sync.commit(step, metrics)
        return StepSummary(step, metrics, metrics["seconds"])

    def _reuse_items(self, step: int, need: int) -> list[dict[str, Any]]:
        import random

        rng = random.Random(f"reuse:{self.cfg.seed}:{step}")
        picks = [rng.choice(self.reuse) for _ in range(need)] if self.reuse else []
        if len(picks) < need:  # nothing valid yet: grounded questions synthesized from the corpus
            picks += self._bootstrap(step, need - len(picks))
        if len(picks) < need:
            raise RuntimeError("cannot fill the solver batch: no valid proposal yet and no bootstrap question")
        return [{"item_id": f"{step}-r{i}", "target": p["target"], "hops": p["hops"], "reuse_question": p["question"]}
                for i, p in enumerate(picks)]

    def _bootstrap(self, step: int, n: int) -> list[dict[str, Any]]:
        """Questions for the first steps of an untrained proposer: the warm-up's grounded solver questions
        (their search retrieves the answer's article) on the embedded corpus, else cloze questions."""
        if self.cfg.search.backend != "http" and self.cfg.search.corpus == "embedded":
            from training.warmup_data import PROPOSER_KINDS, DEFAULT_MIX, Synthesizer

            mix = {k: v for k, v in DEFAULT_MIX.items() if k not in PROPOSER_KINDS and not k.startswith(("retry", "giveup"))}
            rows = Synthesizer(self.search, seed=self.cfg.seed * 1000 + step).generate(n, mix)
            out = []
            for ex in rows:
                question = ex.messages[-1]["content"].rsplit("Question:", 1)[-1].strip()
                out.append({"question": question, "target": ex.target, "hops": ex.hops})
            return out
        import random

        rng = random.Random(f"bootstrap:{self.cfg.seed}:{step}")
        out = []
        for _ in range(50 * n):
            if len(out) == n:
                break
            t = rng.choice(self.pool)
            q = bootstrap_question(t.answer, self.cfg.search.corpus) if self.cfg.search.backend != "http" else None
            if q:
                out.append({"question": q, "target": t.answer, "hops": 1})
        return out

    def _memory_metrics(self, report: Any) -> dict[str, Any]:
        if report is None:
            return {"bank_size": 0, "bank_version": None}
        bank = self.memory.bank
        m: dict[str, Any] = {"bank_size": len(bank.skills()) if bank else 0, "bank_version": self.memory.version,
                             "queue": len(self.memory.queue) if self.memory.queue is not None else 0,
                             "consolidation_started": report.consolidation_started}
        if report.commit is not None:
            c = report.commit
            m["consolidation"] = {"version": c.version, "admitted": len(c.admitted), "evicted": len(c.evicted),
                                  "rejected": c.rejected, "picked": c.picked, "error": c.error}
        return m

    # ---- the loop -----------------------------------------------------------------------------------
    def run(self, start: int, alive: Callable[[], str | None], on_step: Callable[[StepSummary], None]) -> None:
        timeout = self.cfg.train.wait_timeout_s
        for step in range(start, self.cfg.train.steps):
            for role in ("proposer", "solver"):
                self.sync.wait(lambda r=role: self.sync.is_ready(r, step), f"the {role} trainer (step {step})",
                               timeout, alive)
            self.sync_weights()
            on_step(self.run_step(step))
        self.finish()

    def finish(self) -> None:
        """Commit a consolidation still running so its skills are not lost, and snapshot the bank."""
        if self.cfg.memory.mode == "on" and self.memory.consolidator is not None and self.memory.consolidator.busy:
            report = self.memory.commit(self.cfg.train.steps, wait=True, timeout=900)
            if report is not None:
                with open(self.run_dir / "metrics.jsonl", "a") as f:
                    f.write(json.dumps({"final_consolidation": {"version": report.version,
                                        "admitted": len(report.admitted), "rejected": report.rejected}}) + "\n")
        self.memory.close()


def _merge(a: StepOutput, b: StepOutput) -> StepOutput:
    m = dict(a.metrics)
    m["reused_groups"] = b.metrics.get("reused_groups", 0)
    m["solver_status"] = {k: a.metrics["solver_status"].get(k, 0) + b.metrics["solver_status"].get(k, 0)
                          for k in {*a.metrics["solver_status"], *b.metrics["solver_status"]}}
    m["solver_success_rates"] = a.metrics["solver_success_rates"] + b.metrics["solver_success_rates"]
    m["frontier_groups"] = sum(1 for p in m["solver_success_rates"] if 0 < p < 1)
    m["solver_reward_mean"] = _mean([t.reward for t in a.solver + b.solver])
    m["failures"] = a.metrics["failures"] + b.metrics["failures"]
    return StepOutput(a.items + b.items, a.proposer, a.solver + b.solver, a.failures + b.failures,
                      a.outcomes + b.outcomes, m)


def _select_groups(solver: list[Trajectory], questions: int, group_size: int) -> list[Trajectory]:
    """Mark the first ``questions`` groups (fresh before reused) as the trainer's batch; keep the rest."""
    groups: dict[str, list[Trajectory]] = {}
    for t in solver:
        groups.setdefault(t.group_id, []).append(t)
    ordered = sorted(groups.values(), key=lambda g: (len(g) != group_size, g[0].reused))
    out = []
    for i, g in enumerate(ordered):
        for t in sorted(g, key=lambda t: t.sample):
            t.selected = i < questions and len(g) == group_size
            out.append(t)
    return out


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None
