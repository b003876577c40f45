"""The eval's tasks: planning (what runs, what is cached, what is stale) and running them concurrently.

A task is one (question, bank mode, seed) of :func:`sesa_eval.harness.evaluate`, or a cached record whose
LLM judgment failed, to judge again. Each finished task is one JSONL record, appended to the store at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphs.contexts import solver_context
from graphs.solve import solve
from sesa_eval.answerability import question_key
from sesa_eval.controls import CONTROL_MODES, solve_control
from sesa_eval.datasets import EvalQuestion
from sesa_eval.records import RecordStore, bank_ref, record_key, same_skills, skills_sha
from sesa_eval.settings import SKILL_MODES
from sesa_graph.config import SolverConfig
from sesa_graph.policy.base import PolicyUnavailableError
from sesa_graph.rollout.judge import Judge, JudgeItem, Verdict

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
    oracle_doc: dict[str, Any] | None = None
    """Mode oracle: the answer-bearing document given in the first observation."""

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
    no_oracle_doc: dict[str, int] = field(default_factory=dict)
    """dataset -> questions mode oracle does not run: no answer-bearing document (or answerability unknown)."""


def plan_tasks(
    data: Mapping[str, Sequence[EvalQuestion]],
    modes: Sequence[str],
    seeds: Sequence[int | None],
    store: RecordStore,
    memories: Mapping[str, Any],
    answerability: Mapping[str, Mapping[str, Any]] | None = None,
) -> Plan:
    """Tasks still to do, cached results per dataset, stale cached records, and every key of the plan.

    Order: dataset, seed, question, mode -- so concurrent rollouts share sampling settings (a local
    policy batches them together) and an interrupted eval has whole questions across modes.
    Skills are retrieved here, one batched call per dataset and mode, for cached questions too: a cached
    mode-on/placebo record whose question now gets other skills is stale and runs again. Mode oracle
    runs only the questions ``answerability`` (``dataset/id`` -> row) gives an answer-bearing document;
    the others are counted in ``no_oracle_doc`` and left out of the plan.
    """
    tasks: list[Task] = []
    cached: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    keys: list[str] = []
    no_doc: Counter[str] = Counter()
    reach = answerability or {}
    for ds, qs in data.items():
        skills: dict[str, dict[str, tuple[list[str], str]]] = {m: {} for m in modes}
        for mode in modes:
            if mode in SKILL_MODES and qs:
                mem = memories[mode]
                for q, hits in zip(qs, mem.retrieve([q.question for q in qs]), strict=True):
                    skills[mode][q.id] = ([s.id for s in hits], mem.render(hits))
        todo: list[Task] = []
        rejudge: list[Task] = []
        docs = {q.id: (reach.get(question_key(ds, q.id)) or {}).get("doc") for q in qs}
        if "oracle" in modes:
            no_doc[ds] = sum(d is None for d in docs.values())
        for seed in seeds:
            for q in qs:
                for mode in modes:
                    if mode == "oracle" and docs[q.id] is None:
                        continue
                    key = record_key(ds, q.id, mode, seed)
                    keys.append(key)
                    ids, block = skills[mode].get(q.id, ([], ""))
                    rec = store.done(key)
                    if rec is not None and mode in SKILL_MODES and not same_skills(rec, ids, block):
                        stale[mode] += 1
                        rec = None
                    if rec is None:
                        doc = docs[q.id] if mode == "oracle" else None
                        todo.append(Task(q, mode, seed, ids, block, oracle_doc=doc))
                    elif rec.get("judge_method") == "judge_unavailable":
                        rejudge.append(Task(q, mode, seed, list(rec.get("skill_ids", [])), rejudge=rec))
                    else:
                        cached[ds] += 1
        tasks += rejudge + todo
    return Plan(tasks, dict(cached), keys, dict(stale), dict(no_doc))


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
        "bank": bank_ref(bank) if task.mode in SKILL_MODES else None,
        "bank_version": bank["version"] if bank and task.mode in SKILL_MODES else None,
        **({"oracle_doc": task.oracle_doc} if task.oracle_doc else {}),
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
    model = getattr(policy, "name", "?")
    workers: list[asyncio.Task] = []

    def abort(reason: str) -> None:
        if res.aborted is None:
            res.aborted = reason
            for w in workers:
                if w is not asyncio.current_task():
                    w.cancel()

    async def worker() -> None:
        while res.aborted is None:
            try:
                task = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                rec = await run_one(task, policy, search, judge, solver, res, model=model, bank=bank)
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
            if (reason := _too_many_failures(res, rec, max_errors)) is not None:
                abort(reason)

    t0 = time.perf_counter()
    workers = [asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, len(tasks))))]
    await asyncio.gather(*workers, return_exceptions=True)
    for w in workers:  # a crash in the harness itself (not in a rollout) must not pass silently
        if not w.cancelled() and w.exception() is not None:
            raise w.exception()  # type: ignore[misc]
    res.run_s = time.perf_counter() - t0
    return res


async def run_one(
    task: Task,
    policy: Any,
    search: Any,
    judge: Judge,
    solver: SolverConfig,
    res: RunResult,
    *,
    model: str,
    bank: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The record of one task: a cached answer judged again, or a rollout (greedy, or the seed's sampled
    repeat) and its verdict; a rollout that raises is a labelled error record (retried on resume), a policy
    endpoint that is down raises."""
    t0 = time.perf_counter()
    if task.rejudge is not None:
        rec = await _rejudged(task, judge)
        res.rejudged += 1
        return rec
    # no seed: one greedy rollout; seed i: the i-th sampled repeat at the solver's temperature
    ctx = solver_context(solver, policy, search, greedy=task.seed is None, seed=task.seed)
    try:
        if task.mode in CONTROL_MODES:
            state = await solve_control(task.q.question, ctx, task.mode, task.oracle_doc)
        else:
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


async def _rejudged(task: Task, judge: Judge) -> dict[str, Any]:
    """A cached record whose answer is judged again (the judge changed), everything else kept."""
    old = task.rejudge
    (v,) = await judge.judge_many([JudgeItem(task.q.question, old.get("prediction"), list(task.q.golds))])
    return {
        **old,
        "score": v.score,
        "em": v.em,
        "f1": v.f1,
        "correct": bool(v.correct),
        "judge_method": v.method,
        "judge_raw": v.raw,
        "time": time.time(),
    }


def _too_many_failures(res: RunResult, rec: dict[str, Any], max_errors: int) -> str | None:
    """Why the eval stops after ``rec``: more failed rollouts or failed judgments than --max-errors."""
    if res.errors > max_errors:
        return f"{res.errors} rollouts failed (more than --max-errors {max_errors}); last: {rec['error']}"
    if res.judge_unavailable > max_errors:
        return (
            f"{res.judge_unavailable} LLM judgments failed or gave no verdict (more than --max-errors "
            f"{max_errors}): the judge is down, too slow (raise --judge-timeout), or replies without "
            "Correct/Wrong (a thinking template spends its few tokens in <think>: set "
            "judge.chat_template_kwargs {enable_thinking: false})"
        )
    return None
