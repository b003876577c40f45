"""The self-play orchestrator: per step, wait for both trainers, run the self-play step (``training.step``)
against the two rollout policies, apply the skill-memory lifecycle, and commit both roles' trajectories.

It is the skill bank's single writer. Its rollout policies reload the weights each trainer publishes
(``training.coordinator`` says where they are); a step is committed only after its shards, the memory's step
boundary and the metrics line are written, so ``--resume`` restarts at the first uncommitted step.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphs.contexts import SelfPlayContext, propose_context, solver_context
from graphs.skill_replay import replayer
from sesa_graph.config import RunConfig
from sesa_graph.corpus.targets import load_pool
from sesa_graph.fixed_models import with_fallbacks
from sesa_graph.fsutil import write_jsonl_atomic
from sesa_graph.memory.memory import SkillMemory
from sesa_graph.memory.mining import failures_path
from sesa_graph.policy.base import PolicyUnavailableError
from sesa_graph.policy.factory import make_judge, needed_models, role_client, start_models
from sesa_graph.weights_wire import drop, fetch_dir, put_dir
from tools.backends import make_backend
from training.coordinator import Coordinator
from training.metrics_log import append_record
from training.probe_eval import ProbeEval
from training.reuse import ReusePool
from training.search_health import check_search_alive, failed_searches
from training.step import SelfPlayStep
from training.store import TrajectoryStore
from training.sync import SyncDir
from training.tracking import StepTracker

log = logging.getLogger(__name__)


@dataclass
class StepSummary:
    step: int
    metrics: dict[str, Any]
    seconds: float
    consolidation: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Orchestrator:
    def __init__(
        self,
        cfg: RunConfig,
        run_dir: str | Path,
        coordinator: Coordinator | None = None,
        resume: bool = False,
    ) -> None:
        """``coordinator``: the trainers' barrier (:meth:`run` needs it; a step run alone does not)."""
        cfg, self.fallbacks = with_fallbacks(cfg)  # a role whose fetched model is missing: its fallback
        for note in self.fallbacks:
            log.warning(note)
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.store = TrajectoryStore(run_dir)
        self.sync = SyncDir(run_dir)
        self.coord = coordinator
        self.tracker = StepTracker(self.run_dir, cfg.train.report_to, cfg.name, cfg.train.updates_per_step)
        self.search = make_backend(cfg.search)
        logs = self.run_dir / "logs"
        # the fixed models' vLLM servers start side by side with the policies' (each takes minutes on a CPU)
        (self.solver_policy, self.proposer_policy), self.fixed = start_models(
            [
                (cfg.solver_policy, None, logs / "solver-vllm.log"),
                (cfg.proposer_policy, None, logs / "proposer-vllm.log"),
            ],
            {name: cfg.models[name] for name in needed_models(cfg)},
            owner=str(self.run_dir.resolve()),
            policy_gpus=[cfg.train.vllm_gpus.get("solver"), cfg.train.vllm_gpus.get("proposer")],
            log_dir=logs,
            policy_settings=("solver_policy", "proposer_policy"),  # what their timeout errors tell to raise
        )
        clients = [("solver", self.solver_policy), ("proposer", self.proposer_policy)]
        clients += [(f"model:{name}", client) for name, client in self.fixed.items()]
        servers = {
            role if i == 0 else f"{role}-{i + 1}": server.proc.pid
            for role, p in clients
            for i, server in enumerate(getattr(p, "servers", None) or [getattr(p, "server", None)])
            if server is not None and server.proc is not None
        }
        (self.sync.root / "server_pids.json").write_text(json.dumps(servers))
        try:
            self._build(cfg, resume)
        except BaseException:
            self.close()  # the servers must not outlive a failed start
            raise

    def _build(self, cfg: RunConfig, resume: bool) -> None:
        # judge, distiller and RAG reader are fixed models (or, warned, the solver policy), each rendered
        # with its own chat-template arguments
        self.judge = make_judge(
            cfg.judge, self.solver_policy, tokenizer=cfg.solver_policy.train_model, models=self.fixed
        )
        distiller = None
        if cfg.memory.mode == "on":
            distiller = role_client(
                "distiller",
                cfg.distiller.endpoint,
                cfg.distiller.chat_template_kwargs,
                self.fixed,
                self.solver_policy,
                max_tokens=cfg.memory.distiller_max_tokens,
                temperature=cfg.memory.distiller_temperature,
            )
        rag_reader = None
        if cfg.proposer.rag_check:
            ref = cfg.proposer.rag_reader
            rag_reader = role_client(
                "rag_reader", ref.endpoint, ref.chat_template_kwargs, self.fixed, self.solver_policy
            )
        # who does each fixed role, for people and tests: a key of `models:`, 'policy' (warned) or nothing
        roles = {
            "judge": {"none": None, "model": cfg.judge.endpoint}.get(cfg.judge.kind, cfg.judge.kind),
            "distiller": cfg.distiller.endpoint if distiller is not None else None,
            "rag_reader": cfg.proposer.rag_reader.endpoint if rag_reader is not None else None,
        }
        roles["fallbacks"] = self.fallbacks
        (self.run_dir / "roles.json").write_text(json.dumps(roles, indent=1) + "\n")
        bank_dir = self.run_dir / "bank"
        opener = SkillMemory.open if resume and bank_dir.exists() else SkillMemory.create
        self.memory = opener(bank_dir, cfg.memory, distiller=distiller)
        self.pool = load_pool(cfg.train.target_pool, cfg.train.max_hops, cfg.seed)
        self.reuse = ReusePool(self.run_dir / "reuse_pool.json")
        # servers this run did not start may hold anything (another run's weights, a step past the checkpoint
        # being resumed): they are reloaded at the first step whatever its version
        policies = {"proposer": self.proposer_policy, "solver": self.solver_policy}
        self.versions = {r: -1 if getattr(p, "fetches_weights", False) else 0 for r, p in policies.items()}
        self.ctx = SelfPlayContext(
            proposer=propose_context(
                cfg,
                self.proposer_policy,
                self.search,
                judge=rag_reader,
                seed=cfg.seed,
                # 'random' distractors: documents found for other targets, unrelated to the question
                distractor_queries=[t.answer for t in self.pool],
                matcher=self.judge,
            ),
            solver=solver_context(cfg.solver, self.solver_policy, self.search, greedy=False, seed=None),
            judge=self.judge,
            group_size=cfg.solver.group_size,
            rewards=cfg.rewards,
            memory=self.memory if cfg.memory.mode != "off" else None,
        )
        self.selfplay = SelfPlayStep(cfg, self.ctx, self.pool, self.reuse, self.search)
        self.memory.replay = replayer(cfg, self.solver_policy, self.search, self.judge, self.memory.render)
        self.probe = None
        if cfg.train.probe_every:  # the learning curve, with the run's own policy, search, judge, encoder
            bank = getattr(self.memory, "bank", None)
            self.probe = ProbeEval(
                cfg,
                self.run_dir,
                policy=self.solver_policy,
                search=self.search,
                judge=self.judge,
                encoder=bank.encoder if bank is not None else None,
            )

    # ---- weights ------------------------------------------------------------------------------------
    def sync_weights(self, ready: dict[str, dict[str, Any]]) -> dict[str, float]:
        """Load each trainer's published weights (``ready``: the roles' ready messages) into its rollout
        policy; with vLLM the server is checked to serve the published version (and its embedding) before
        any rollout of the step starts. Weights sent through the coordinator land in this node's run
        directory first; servers on other nodes (``fetches_weights``) fetch them from the coordinator
        themselves."""
        seconds: dict[str, float] = {}
        for role, policy in (("proposer", self.proposer_policy), ("solver", self.solver_policy)):
            w, v = ready[role]["weights"], ready[role]["step"]
            t0 = time.perf_counter()
            path = Path(w["path"]) if w["kind"] == "file" else self.sync.weights_dir(role)
            new = v != self.versions[role]  # version 0 is the weights the servers started with
            if w["kind"] == "store":
                sent = self.coord.bytes_sent
                sent[f"weights/{role}"] = sent.get(f"weights/{role}", 0) + w["bytes"]
                if new:
                    fetch_dir(self.coord.store, w["prefix"], path)
            try:
                if w["kind"] != "nccl" and new and hasattr(policy, "reload"):
                    if getattr(policy, "fetches_weights", False):
                        policy.reload(path, fetch=self._relay(role, v, w))
                    else:
                        policy.reload(path)  # a vLLM server must then report version v
            finally:
                if w["kind"] == "store":
                    drop(self.coord.store, w["prefix"])
            if new:
                self.versions[role] = v
                seconds[role] = round(time.perf_counter() - t0, 3)
        return seconds

    def _relay(self, role: str, version: int, w: dict[str, Any]) -> dict[str, Any]:
        """Where a server on another node fetches version ``version``: the trainer's prefix in the coordinator,
        or (weights read from a shared file) a copy this process puts there, dropped with the next step's."""
        prefix = w.get("prefix")
        if prefix is None:
            prefix = f"relay/{role}"
            drop(self.coord.store, prefix)
            put_dir(self.coord.store, prefix, Path(w["path"]), version)
        return {"host": self.coord.host, "port": self.coord.port, "prefix": prefix}

    def replay(self, role: str, step: int) -> tuple[dict[str, Any], bytes]:
        """A committed step's metrics and ``role`` shard, for a trainer resumed from an older checkpoint."""
        import pyarrow.parquet as pq

        from training.sync import SyncFileError

        path = self.store.path(step, role)
        try:
            data = path.read_bytes()
            pq.read_metadata(io.BytesIO(data))
        except Exception as exc:  # noqa: BLE001 -- missing, unreadable or not Parquet: named, not '<Buffer>'
            raise SyncFileError(
                f"{path} cannot be read ({type(exc).__name__}: {str(exc)[:160]}): step {step}'s committed {role} "
                "trajectories, which the resumed trainer must train on again; restore the file from a backup, or "
                f"move {self.sync.root}/committed-{step}.json and every later one aside to run those steps again"
            ) from None
        return self.sync.committed(step), data

    def servers_dead(self) -> str | None:
        """A message naming a policy server that has exited (None while all run or none is ours)."""
        for policy in (self.solver_policy, self.proposer_policy, *self.fixed.values()):
            if (msg := getattr(policy, "dead", lambda: None)()) is not None:
                return msg
        return None

    def close(self) -> None:
        """Stop the servers this orchestrator started, the policies' and the fixed models' (idempotent)."""
        for client in (self.solver_policy, self.proposer_policy, *self.fixed.values()):
            getattr(client, "close", lambda: None)()
        if getattr(self, "memory", None) is not None:
            self.memory.close()  # releases the bank's writer lock, so a resume in this process can take it
        self.tracker.close()

    # ---- one step -----------------------------------------------------------------------------------
    def run_step(self, step: int, timing: dict[str, Any] | None = None) -> StepSummary:
        t0 = time.perf_counter()
        cfg = self.cfg
        self.reuse.rewind(step)
        policy_versions = (self.versions["proposer"], self.versions["solver"])
        out = self.selfplay.run(step, self.memory.version, policy_versions)
        check_search_alive(self.search, failed_searches(out.proposer, out.solver), step)
        self.store.write(step, "proposer", out.proposer)
        self.store.write(step, "solver", out.solver)
        # every wrong rollout of the step, whatever the memory mode: `sesa bank mine` reads them (priming);
        # one file per step, rewritten whole, so a step run again after a crash replaces its own records
        write_jsonl_atomic(failures_path(self.run_dir, step), out.failures)
        report = self.memory.end_step(step, out.outcomes, out.failures) if cfg.memory.mode != "off" else None
        self.reuse.add(step, out.fresh)  # after the step's picks, so a step never reuses its own questions
        self.reuse.record(
            step, {t.question: t.success_rate for t in out.solver if t.success_rate is not None}
        )
        self.reuse.save()
        metrics = dict(out.metrics)
        metrics.update(
            self._memory_metrics(report),
            seconds=round(time.perf_counter() - t0, 2),
            policy_versions=dict(self.versions),
            time=time.time(),
            **(timing or {}),
        )
        append_record(self.run_dir, metrics)
        self.tracker.log_step(metrics)
        self.sync.commit(step, metrics)  # the run's record: --resume starts after the last one
        if self.coord is not None:
            shards = {r: self.store.path(step, r).read_bytes() for r in ("proposer", "solver")}
            self.coord.commit(step, shards, metrics)
        return StepSummary(step, metrics, metrics["seconds"])

    def _memory_metrics(self, report: Any) -> dict[str, Any]:
        if report is None:
            return {"bank_size": 0, "bank_version": None}
        bank = self.memory.bank
        m: dict[str, Any] = {
            "bank_size": len(bank.skills()) if bank else 0,
            "bank_version": self.memory.version,
            "queue": len(self.memory.queue) if self.memory.queue is not None else 0,
            "consolidation_started": report.consolidation_started,
        }
        if report.commit is not None:
            c = report.commit
            m["consolidation"] = {
                "version": c.version,
                "admitted": len(c.admitted),
                "evicted": len(c.evicted),
                "rejected": c.rejected,
                "picked": c.picked,
                "error": c.error,
            }
        return m

    # ---- the loop -----------------------------------------------------------------------------------
    def run(
        self, start: int, alive: Callable[[], str | None], on_step: Callable[[StepSummary], None]
    ) -> None:
        timeout = self.cfg.train.wait_timeout_s

        def everyone_alive() -> str | None:
            return alive() or self.servers_dead()

        for step in range(start, self.cfg.train.steps):
            t0 = time.perf_counter()
            assert self.coord is not None, "Orchestrator.run needs the coordinator"
            ready = self.coord.wait_ready(step, timeout, everyone_alive, self.replay)
            waited = time.perf_counter() - t0
            synced = self.sync_weights(ready)
            if (dead := self.servers_dead()) is not None:
                raise PolicyUnavailableError(dead)
            timing: dict[str, Any] = {"wait_trainers_s": round(waited, 2), "weight_sync_s": synced}
            # each trainer's TRL numbers of the update that made the weights this step runs on (step - 1's)
            if updates := {r: m["update"] for r, m in ready.items() if m.get("update")}:
                timing["updates"] = updates
            summary = self.run_step(step, timing=timing)
            self.probe_step(summary)
            on_step(summary)
        self.finish()

    def probe_step(self, summary: StepSummary) -> None:
        """The learning curve's eval of a committed step, when due (``training.probe_eval``); it overlaps
        the trainers' update of this step, which the next step waits for anyway."""
        if self.probe is None:
            return
        probe = self.probe.after_step(
            summary.step, summary.metrics, self.versions["solver"], self.memory.version
        )
        if probe is not None:
            summary.metrics["probe"] = probe
            self.tracker.log_step({"step": summary.step, "probe": probe})

    def finish(self) -> None:
        """Commit a consolidation still running so its skills are not lost, and snapshot the bank."""
        if (
            self.cfg.memory.mode == "on"
            and self.memory.consolidator is not None
            and self.memory.consolidator.busy
        ):
            report = self.memory.commit(self.cfg.train.steps, wait=True, timeout=900)
            if report is not None:
                final = {
                    "version": report.version,
                    "admitted": len(report.admitted),
                    "rejected": report.rejected,
                }
                append_record(self.run_dir, {"final_consolidation": final})
        self.memory.close()
