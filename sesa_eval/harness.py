"""The evaluation harness: benchmark questions through the solve graph, judged, cached, reported.

What it measures (the paper's protocol): one greedy rollout per question (or ``seeds`` sampled ones),
at most ``max_turns`` assistant turns, normalized exact match, else (when one is configured: judge kind
``model`` or ``openai``) an LLM judge; per dataset the mean
score, and the unweighted mean of the datasets as the headline. Each bank mode is a row; every mode
runs the same weights in the same process, side by side:

- ``off``: no skills in the prompt (SESA-Off);
- ``on``: the top-k skills of a frozen bank (``--bank``; retrieval only, nothing is credited or
  distilled -- the bank is opened read-only) (SESA-On);
- ``placebo``: as many skills as ``on`` retrieves, each about as long, about something unrelated
  (tells gains from skill content apart from gains from a longer prompt).

Throughput: up to ``concurrency`` questions are in flight at once, each its own solve-graph
invocation; a local policy micro-batches their turns, an endpoint gets that many requests.

Caching: every finished question is appended to ``evals/<name>/records.jsonl`` at once, keyed by
dataset / id / mode / seed, so a killed eval resumes where it stopped; a mode-on/placebo record is reused
only while the bank gives its question the same skills. Infrastructure failures are not
results: a rollout that ended ``search_error`` or raised is recorded with status ``error`` and run again
on resume; a verdict whose LLM judge failed or gave no verdict (``judge_unavailable``) is judged again on
resume. After
more than ``max_errors`` such failures, or when the policy endpoint stays down after its retries, the
eval stops; what finished is kept.

    sesa eval --data-dir ../shared/data/benchmarks --bank-modes off,on --bank runs/NAME/memory --limit 20
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphs.solve import solve
from sesa_eval.datasets import EvalQuestion, hygiene_report, load_datasets
from sesa_eval.records import (
    RECORDS,
    SETTINGS,
    EvalError,  # noqa: F401 - part of this module's API (the CLI and tests import it from here)
    RecordStore,
    bank_ref,
    check_settings_file,
    record_key,
    same_skills,
    skills_sha,
)
from sesa_eval.settings import EvalSettings
from sesa_graph.config import SolverConfig
from sesa_graph.nodes.agent_loop import RolloutContext, solver_spec
from sesa_graph.nodes.judge import Judge, JudgeItem, Verdict
from sesa_graph.policy.base import PolicyUnavailableError
from sesa_graph.policy.factory import (  # noqa: F401 - part of this module's API
    make_fixed_models,
    make_judge,
    make_policy,
    probe_endpoint,
)

log = logging.getLogger(__name__)


# ---- planning --------------------------------------------------------------------------------------------


@dataclass
class Task:
    """One (question, mode, seed) to run, or (with ``rejudge``) a cached record to judge again."""

    q: EvalQuestion
    mode: str
    seed: int | None
    skill_ids: list[str] = field(default_factory=list)
    skills_block: str = ""
    rejudge: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return record_key(self.q.dataset, self.q.id, self.mode, self.seed)


@dataclass
class Plan:
    """What an invocation has to do: tasks to run, cached results per dataset, stale records, all keys."""

    tasks: list[Task]
    cached: dict[str, int]
    keys: list[str]
    stale: dict[str, int] = field(default_factory=dict)  # mode -> cached records made with other skills


def plan_tasks(
    data: Mapping[str, Sequence[EvalQuestion]],
    modes: Sequence[str],
    seeds: Sequence[int | None],
    store: RecordStore,
    memories: Mapping[str, Any],
) -> Plan:
    """Tasks still to do, cached results per dataset, stale cached records, and every key of the plan.

    Order: dataset, seed, question, mode -- so concurrent rollouts share sampling settings (a local
    policy batches them together) and an interrupted eval has whole questions across modes.
    Skills are retrieved here, one batched call per dataset and mode, for cached questions too: a cached
    mode-on/placebo record whose question now gets other skills is stale and runs again.
    """
    tasks: list[Task] = []
    cached: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    keys: list[str] = []
    for ds, qs in data.items():
        skills: dict[str, dict[str, tuple[list[str], str]]] = {m: {} for m in modes}
        for mode in modes:
            if mode != "off" and qs:
                mem = memories[mode]
                for q, hits in zip(qs, mem.retrieve([q.question for q in qs]), strict=True):
                    skills[mode][q.id] = ([s.id for s in hits], mem.render(hits))
        todo: list[Task] = []
        rejudge: list[Task] = []
        for seed in seeds:
            for q in qs:
                for mode in modes:
                    key = record_key(ds, q.id, mode, seed)
                    keys.append(key)
                    ids, block = skills[mode].get(q.id, ([], ""))
                    rec = store.done(key)
                    if rec is not None and mode != "off" and not same_skills(rec, ids, block):
                        stale[mode] += 1
                        rec = None
                    if rec is None:
                        todo.append(Task(q, mode, seed, ids, block))
                    elif rec.get("judge_method") == "judge_unavailable":
                        rejudge.append(Task(q, mode, seed, list(rec.get("skill_ids", [])), rejudge=rec))
                    else:
                        cached[ds] += 1
        tasks += rejudge + todo
    return Plan(tasks, dict(cached), keys, dict(stale))


# ---- running ---------------------------------------------------------------------------------------------


def make_record(
    task: Task,
    state: Mapping[str, Any] | None,
    verdict: Verdict | None,
    *,
    model: str,
    bank: Mapping[str, Any] | None,
    elapsed_s: float,
    error: str | None = None,
) -> dict[str, Any]:
    """The JSONL record of one finished (question, mode, seed)."""
    q, st = task.q, state or {}
    status = st.get("status", "error")
    if error is not None or status == "search_error":
        status, error = "error", error or f"search_error: {st.get('error')}"
    v = verdict
    return {
        "key": task.key,
        "dataset": q.dataset,
        "id": q.id,
        "mode": task.mode,
        "seed": task.seed,
        "question": q.question,
        "golds": list(q.golds),
        "prediction": st.get("final"),
        "score": v.score if v else 0.0,
        "em": v.em if v else 0.0,
        "f1": v.f1 if v else 0.0,
        "correct": bool(v.correct) if v else False,
        "judge_method": v.method if v else None,
        "judge_raw": v.raw if v else None,
        "status": status,
        "error": error,
        "turns": int(st.get("n_turns", 0)),
        "searches": len(st.get("searches", []) or []),
        "queries": [s["query"] for s in st.get("searches", []) or []],
        "trace": [t.get("text", "") for t in st.get("turns", []) or []],
        "skill_ids": list(task.skill_ids),
        "skills_sha": skills_sha(task.skills_block),
        "bank": bank_ref(bank) if task.mode != "off" else None,
        "bank_version": bank["version"] if bank and task.mode != "off" else None,
        "model": model,
        "elapsed_s": round(elapsed_s, 3),
        "time": time.time(),
    }


@dataclass
class RunResult:
    """What one invocation did."""

    planned: int
    cached: dict[str, int]
    computed: int = 0
    rejudged: int = 0
    errors: int = 0
    judge_unavailable: int = 0
    run_s: float = 0.0
    aborted: str | None = None
    keys: list[str] = field(default_factory=list)


async def run_tasks(
    tasks: Sequence[Task],
    *,
    policy: Any,
    search: Any,
    judge: Judge,
    solver: SolverConfig,
    store: RecordStore,
    concurrency: int,
    max_errors: int,
    bank: Mapping[str, Any] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    result: RunResult | None = None,
) -> RunResult:
    """Run ``tasks`` with up to ``concurrency`` in flight; append each record as it finishes.

    Counts go to ``result`` (a new :class:`RunResult` by default), which is up to date even when the
    caller is cancelled midway."""
    res = result if result is not None else RunResult(planned=len(tasks), cached={})
    queue: asyncio.Queue[Task] = asyncio.Queue()
    for t in tasks:
        queue.put_nowait(t)
    greedy_spec, sampled_spec = solver_spec(solver, greedy=True), solver_spec(solver, greedy=False)
    model = getattr(policy, "name", "?")
    workers: list[asyncio.Task] = []

    def abort(reason: str) -> None:
        if res.aborted is None:
            res.aborted = reason
            for w in workers:
                if w is not asyncio.current_task():
                    w.cancel()

    async def one(task: Task) -> dict[str, Any]:
        t0 = time.perf_counter()
        if task.rejudge is not None:
            old = task.rejudge
            (v,) = await judge.judge_many(
                [JudgeItem(task.q.question, old.get("prediction"), list(task.q.golds))]
            )
            rec = {
                **old,
                "score": v.score,
                "em": v.em,
                "f1": v.f1,
                "correct": bool(v.correct),
                "judge_method": v.method,
                "judge_raw": v.raw,
                "time": time.time(),
            }
            res.rejudged += 1
            return rec
        spec = greedy_spec if task.seed is None else sampled_spec
        ctx = RolloutContext(policy=policy, search=search, spec=spec, seed=task.seed)
        try:
            state = await solve(task.q.question, ctx, task.skills_block or None)
        except PolicyUnavailableError:
            raise
        except Exception as exc:  # noqa: BLE001 -- one question's failure is a labelled record, retried on resume
            log.warning("%s: rollout failed: %s: %s", task.key, type(exc).__name__, exc)
            return make_record(
                task,
                None,
                None,
                model=model,
                bank=bank,
                elapsed_s=time.perf_counter() - t0,
                error=f"{type(exc).__name__}: {exc}",
            )
        verdict = None
        if state.get("status") != "search_error":
            (verdict,) = await judge.judge_many(
                [JudgeItem(task.q.question, state.get("final"), list(task.q.golds))]
            )
        res.computed += 1
        return make_record(task, state, verdict, model=model, bank=bank, elapsed_s=time.perf_counter() - t0)

    async def worker() -> None:
        while res.aborted is None:
            try:
                task = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                rec = await one(task)
            except PolicyUnavailableError as exc:
                abort(f"the policy endpoint is down: {exc}")
                return
            store.append(rec)
            if rec["status"] == "error":
                res.errors += 1
            if rec.get("judge_method") == "judge_unavailable":
                res.judge_unavailable += 1
            if on_record is not None:
                on_record(rec)
            if res.errors > max_errors:
                abort(
                    f"{res.errors} rollouts failed (more than --max-errors {max_errors}); last: {rec['error']}"
                )
            elif res.judge_unavailable > max_errors:
                abort(
                    f"{res.judge_unavailable} LLM judgments failed or gave no verdict (more than --max-errors "
                    f"{max_errors}): the judge is down, too slow (raise --judge-timeout), or replies without "
                    "Correct/Wrong (a thinking template spends its few tokens in <think>: set "
                    "judge.chat_template_kwargs {enable_thinking: false})"
                )

    t0 = time.perf_counter()
    workers = [asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, len(tasks))))]
    await asyncio.gather(*workers, return_exceptions=True)
    for w in workers:  # a crash in the harness itself (not in a rollout) must not pass silently
        if not w.cancelled() and w.exception() is not None:
            raise w.exception()  # type: ignore[misc]
    res.run_s = time.perf_counter() - t0
    return res


# ---- construction of the pieces --------------------------------------------------------------------------


def open_memories(
    modes: Sequence[str], bank: Path | None, top_k: int, encoder: Any = None
) -> tuple[dict[str, Any], dict | None, list]:
    """SkillMemory per mode over one read-only bank; the bank's identity; its skills (for hygiene).

    ``encoder`` defaults to the bank's own embedder (tests pass a fake one)."""
    from sesa_graph.memory.bank import SkillBank
    from sesa_graph.memory.config import MemoryConfig
    from sesa_graph.memory.memory import SkillMemory
    from sesa_graph.memory.snapshot import bank_dir, live_skills, read_state

    memories: dict[str, Any] = {"off": SkillMemory(MemoryConfig(mode="off"), None, None)}
    if bank is None:
        return memories, None, []
    path = bank_dir(bank)
    state = read_state(path)
    info = {
        "path": str(path.resolve()),
        "version": int(state["version"]),
        "n_skills": int(state["n_skills"]),
        "embedder": state["embedder"],
    }
    if not any(m != "off" for m in modes):
        return memories, info, live_skills(path)
    # 'static' = retrieval from the bank as it is; nothing is credited (we never call apply_outcomes)
    cfg = MemoryConfig(
        mode="static", embedder=state["embedder"], top_k=top_k, chroma_host=state.get("chroma_host")
    )
    sbank = SkillBank.open(path, cfg, encoder, read_only=True)
    memories["on"] = SkillMemory(cfg, sbank, None)
    memories["placebo"] = SkillMemory(cfg.model_copy(update={"mode": "placebo"}), sbank, None)
    return memories, info, sbank.skills()


# ---- the whole eval --------------------------------------------------------------------------------------


@dataclass
class EvalOutcome:
    settings: EvalSettings
    run: RunResult
    report: dict[str, Any]
    out_dir: Path
    setup_s: float


async def evaluate(
    settings: EvalSettings,
    *,
    policy: Any = None,
    search: Any = None,
    judge: Judge | None = None,
    encoder: Any = None,
    overwrite: bool = False,
    progress: Any = None,
    on_start: Callable[[dict[str, Any]], None] | None = None,
) -> EvalOutcome:
    """Run an eval end to end: data, bank, hygiene, the rollouts (resuming), the report files.

    ``policy``/``search``/``judge`` default to what ``settings`` describes (tests pass scripted ones).
    ``progress`` is an optional :class:`sesa_eval.progress.EvalProgress`.
    """
    from sesa_eval.report import build_report, write_report
    from sesa_graph.fsutil import write_json_atomic

    t_setup = time.perf_counter()
    data = load_datasets(settings.datasets, settings.data_dir, settings.limit)
    memories, bank_info, skills = open_memories(settings.bank_modes, settings.bank, settings.top_k, encoder)
    all_q = [q for qs in data.values() for q in qs]
    hygiene = hygiene_report(
        all_q,
        settings.target_pool,
        skills if settings.bank is not None else None,
        bank_label=f"skill bank {bank_info['path']} v{bank_info['version']}" if bank_info else "",
    )
    out_dir = settings.out_dir
    identity = settings.identity()
    check_settings_file(out_dir, identity, overwrite)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = RecordStore(out_dir / RECORDS)
    plan = plan_tasks(data, settings.bank_modes, settings.seed_list, store, memories)
    tasks, cached, keys = plan.tasks, plan.cached, plan.keys
    if plan.stale:
        log.info(
            "%s: %s cached record(s) were made with other skills than %s gives their questions now; "
            "running them again",
            out_dir,
            ", ".join(f"{n} mode-{m}" for m, n in plan.stale.items()),
            bank_ref(bank_info),
        )
    if on_start is not None:
        on_start(
            {
                "datasets": {k: len(v) for k, v in data.items()},
                "tasks": len(tasks),
                "cached": cached,
                "stale": plan.stale,
                "hygiene": hygiene,
                "bank": bank_info,
            }
        )
    need_policy = any(t.rejudge is None for t in tasks) or (bool(tasks) and settings.judge.kind == "policy")
    if search is None and any(t.rejudge is None for t in tasks):
        from tools.backends import make_backend

        search = make_backend(settings.search)
    owned_policy = policy is None and need_policy  # a vLLM server started here is stopped here
    if owned_policy:
        policy = make_policy(settings.policy, log_path=out_dir / "logs" / "vllm.log")
    judge_models: dict[str, Any] = {}  # a fixed judge model started here is stopped here
    if judge is None:
        if settings.judge.kind == "model":
            judge_models = make_fixed_models(
                settings.models, [settings.judge.endpoint], log_dir=out_dir / "logs"
            )
        judge = make_judge(settings.judge, policy, models=judge_models)
    write_json_atomic(
        out_dir / SETTINGS, {"identity": identity, "settings": settings.model_dump(mode="json")}
    )
    setup_s = time.perf_counter() - t_setup
    run = RunResult(planned=len(tasks), cached=cached, keys=keys)
    if progress is not None:
        progress.start(data, settings.bank_modes, len(settings.seed_list), cached, store)
    t_run = time.perf_counter()
    try:
        await run_tasks(
            tasks,
            policy=policy,
            search=search,
            judge=judge,
            solver=settings.solver,
            store=store,
            concurrency=settings.concurrency,
            max_errors=settings.max_errors,
            bank=bank_info,
            on_record=progress.update if progress is not None else None,
            result=run,
        )
    except asyncio.CancelledError:  # Ctrl-C: the records are on disk; leave a report that says so
        run.aborted = "interrupted"
        raise
    finally:
        run.run_s = run.run_s or time.perf_counter() - t_run
        if progress is not None:
            progress.stop()
        records = [store.latest[k] for k in keys if k in store.latest]
        per_q = len(settings.bank_modes) * len(settings.seed_list)  # rollouts per question
        rate = 60 * run.computed / run.run_s if run.run_s else None
        timing = {
            "setup_s": round(setup_s, 1),
            "run_s": round(run.run_s, 1),
            "computed": run.computed,
            "rejudged": run.rejudged,
            "cached": sum(cached.values()),
            "stale_rerun": sum(plan.stale.values()),
            "rollouts_per_minute": round(rate, 2) if rate is not None else None,
            "questions_per_minute": round(rate / per_q, 2) if rate is not None else None,
        }
        report = build_report(
            records,
            settings=settings,
            datasets=list(data),
            hygiene=hygiene,
            bank=bank_info,
            timing=timing,
            aborted=run.aborted,
            planned=len(keys),
        )
        write_report(out_dir, report)
        if "on" in memories:  # 'on' and 'placebo' share one read-only bank
            memories["on"].bank.close()
        if owned_policy:
            getattr(policy, "close", lambda: None)()
        for client in judge_models.values():
            getattr(client, "close", lambda: None)()
    return EvalOutcome(settings, run, report, out_dir, setup_s)
