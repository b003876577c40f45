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
  (tells gains from skill content apart from gains from a longer prompt);
- the controls ``closed`` (closed-book floor) and ``oracle`` (open-book ceiling), see
  :mod:`sesa_eval.controls`.

Before any rollout, each question's answerability (is a gold answer within the search's reach,
:mod:`sesa_eval.answerability`) is computed once with the eval's own search backend and cached beside the
records; every table is reported on all questions and on the answerable subset.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sesa_eval.answerability import ensure_answerability, question_key, read_answerability
from sesa_eval.datasets import check_probe_cut, check_warm_split, hygiene_report, load_datasets
from sesa_eval.records import (
    ANSWERABILITY,
    OWNER_LOCK,
    RECORDS,
    REPORT_JSON,
    REPORT_MD,
    SETTINGS,
    EvalError,  # noqa: F401 - part of this module's API (the CLI and tests import it from here)
    RecordStore,
    bank_ref,
    check_settings_file,
    lock_eval,
)
from sesa_eval.settings import SKILL_MODES, EvalSettings
from sesa_eval.tasks import Plan, RunResult, plan_tasks, run_tasks
from sesa_graph.owner_lock import OwnerLock
from sesa_graph.policy.factory import (  # noqa: F401 - part of this module's API
    make_fixed_models,
    make_judge,
    make_policy,
    probe_endpoint,
)
from sesa_graph.rollout.judge import Judge

log = logging.getLogger(__name__)


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
    if not any(m in SKILL_MODES for m in modes):
        return memories, info, live_skills(path)
    # 'static' = retrieval from the bank as it is; nothing is credited (we never call apply_outcomes)
    cfg = MemoryConfig(
        mode="static", embedder=state["embedder"], top_k=top_k, chroma_host=state.get("chroma_host")
    )
    sbank = SkillBank.open(path, cfg, encoder, read_only=True)
    memories["on"] = SkillMemory(cfg, sbank, None)
    memories["placebo"] = SkillMemory(cfg.model_copy(update={"mode": "placebo"}), sbank, None)
    return memories, info, sbank.skills()


def _drop_if_no_records(out_dir: Path, lock: OwnerLock) -> None:
    """After a failed first eval of this name: remove what it wrote if no record was kept, so no empty
    ``evals/<name>/`` is left behind (the owner lock last, still held). A server log that explains the
    failure stays."""
    records = out_dir / RECORDS
    if records.exists() and records.stat().st_size > 0:
        return
    for name in (RECORDS, SETTINGS, REPORT_MD, REPORT_JSON, ANSWERABILITY):
        (out_dir / name).unlink(missing_ok=True)
    lock.release(remove=True)
    for d in (out_dir / "logs", out_dir):
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


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
    from sesa_graph.fsutil import write_json_atomic

    t_setup = time.perf_counter()
    inputs = load_inputs(settings, encoder)
    out_dir = settings.out_dir
    identity = settings.identity()
    fresh = not out_dir.is_dir() or not any(p.name != OWNER_LOCK for p in out_dir.iterdir())
    lock = lock_eval(out_dir)  # before anything in it is written or removed
    try:
        check_settings_file(out_dir, identity, overwrite)
        store = RecordStore(out_dir / RECORDS)
        reach, run_data, plan, search = await _plan(settings, inputs, store, search)
        if on_start is not None:
            on_start(_start_info(settings, inputs, run_data, plan, reach))
        clients = _Clients.make(settings, plan.tasks, policy, search, judge)
        write_json_atomic(
            out_dir / SETTINGS, {"identity": identity, "settings": settings.model_dump(mode="json")}
        )
        setup_s = time.perf_counter() - t_setup
        run = RunResult(planned=len(plan.tasks), cached=plan.cached, keys=plan.keys)
        if progress is not None:
            progress.start(
                run_data, settings.bank_modes, len(settings.seed_list), plan.cached, store, plan.no_oracle_doc
            )
        t_run = time.perf_counter()
        try:
            await run_tasks(
                plan.tasks,
                policy=clients.policy,
                search=clients.search,
                judge=clients.judge,
                solver=settings.solver,
                store=store,
                concurrency=settings.concurrency,
                max_errors=settings.max_errors,
                bank=inputs.bank_info,
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
            report = _write_report(settings, inputs, run, store, plan, reach, setup_s)
            _close(inputs.memories, clients)
        return EvalOutcome(settings, run, report, out_dir, setup_s)
    except BaseException:
        if fresh:
            _drop_if_no_records(out_dir, lock)
        raise
    finally:
        lock.release()


async def _plan(
    settings: EvalSettings, inputs: EvalInputs, store: RecordStore, search: Any
) -> tuple[dict, dict[str, list[Any]], Plan, Any]:
    """Each question's answerability (computed once, kept in the eval's folder), the questions that get
    rollouts (all, or the answerable ones) and the plan of what to run; the search, if it had to start."""
    out_dir = settings.out_dir
    known = read_answerability(out_dir)
    if search is None and any(question_key(q.dataset, q.id) not in known for q in inputs.questions):
        search = _search(settings)
    reach = await ensure_answerability(
        inputs.questions, search, settings.solver.search_k, settings.solver.doc_chars, out_dir
    )
    run_data = inputs.data
    if settings.subset == "answerable":  # the rest are counted in the report's answerability table
        run_data = {
            ds: [q for q in qs if reach.get(question_key(q.dataset, q.id), {}).get("answerable")]
            for ds, qs in inputs.data.items()
        }
    plan = plan_tasks(run_data, settings.bank_modes, settings.seed_list, store, inputs.memories, reach)
    if plan.stale:
        log.info(
            "%s: %s cached record(s) were made with other skills than %s gives their questions now; "
            "running them again",
            out_dir,
            ", ".join(f"{n} mode-{m}" for m, n in plan.stale.items()),
            bank_ref(inputs.bank_info),
        )
    return reach, run_data, plan, search


@dataclass
class EvalInputs:
    """What an eval runs on: its questions by dataset, the memory of each bank mode, the bank's identity
    and the data-hygiene report."""

    data: dict[str, list[Any]]
    memories: dict[str, Any]
    bank_info: dict | None
    hygiene: dict[str, Any]

    @property
    def questions(self) -> list[Any]:
        return [q for qs in self.data.values() for q in qs]


def load_inputs(settings: EvalSettings, encoder: Any = None) -> EvalInputs:
    """The datasets (checked against the probe cut and the warm model's split), the bank, the hygiene."""
    data = load_datasets(settings.datasets, settings.data_dir, settings.limit)
    check_probe_cut(data, settings.solver.doc_chars)
    check_warm_split(settings.policy.model, data)
    memories, bank_info, skills = open_memories(settings.bank_modes, settings.bank, settings.top_k, encoder)
    hygiene = hygiene_report(
        [q for qs in data.values() for q in qs],
        settings.target_pool,
        skills if settings.bank is not None else None,
        bank_label=f"skill bank {bank_info['path']} v{bank_info['version']}" if bank_info else "",
    )
    return EvalInputs(data, memories, bank_info, hygiene)


def _search(settings: EvalSettings) -> Any:
    from tools.backends import make_backend

    return make_backend(settings.search)


def _start_info(
    settings: EvalSettings, inputs: EvalInputs, run_data: dict[str, list[Any]], plan: Plan, reach: dict
) -> dict[str, Any]:
    """What ``on_start`` is told once the work is planned."""
    return {
        "datasets": {k: len(v) for k, v in run_data.items()},
        "subset": settings.subset,
        "tasks": len(plan.tasks),
        "cached": plan.cached,
        "stale": plan.stale,
        "answerable": sum(bool(r["answerable"]) for r in reach.values()),
        "answerability_known": len(reach),
        "no_oracle_doc": plan.no_oracle_doc,
        "hygiene": inputs.hygiene,
        "bank": inputs.bank_info,
    }


@dataclass
class _Clients:
    """The policy, search and judge the rollouts use; what was started here (``owned_policy``,
    ``judge_models``) is stopped here."""

    policy: Any
    search: Any
    judge: Any
    owned_policy: bool
    judge_models: dict[str, Any]

    @classmethod
    def make(cls, settings: EvalSettings, tasks: list[Any], policy: Any, search: Any, judge: Any) -> _Clients:
        """Start what the planned tasks need and was not given: a task not answered from cache needs the
        policy and search; judge 'policy' needs the policy even to rejudge."""
        need_policy = any(t.rejudge is None for t in tasks) or (
            bool(tasks) and settings.judge.kind == "policy"
        )
        if search is None and any(t.rejudge is None for t in tasks):
            search = _search(settings)
        owned_policy = policy is None and need_policy  # a vLLM server started here is stopped here
        if owned_policy:
            policy = make_policy(settings.policy, log_path=settings.out_dir / "logs" / "vllm.log")
        judge_models: dict[str, Any] = {}  # a fixed judge model started here is stopped here
        if judge is None:
            if settings.judge.kind == "model":
                judge_models = make_fixed_models(
                    settings.models, [settings.judge.endpoint], log_dir=settings.out_dir / "logs"
                )
            judge = make_judge(settings.judge, policy, models=judge_models)
        return cls(policy, search, judge, owned_policy, judge_models)


def _write_report(
    settings: EvalSettings,
    inputs: EvalInputs,
    run: RunResult,
    store: RecordStore,
    plan: Plan,
    reach: dict,
    setup_s: float,
) -> dict[str, Any]:
    """The report of the records so far (all, or up to an abort), with the timing, written as report.*."""
    from sesa_eval.report import build_report
    from sesa_eval.report_markdown import write_report

    records = [store.latest[k] for k in plan.keys if k in store.latest]
    per_q = len(settings.bank_modes) * len(settings.seed_list)  # rollouts per question
    rate = 60 * run.computed / run.run_s if run.run_s else None
    timing = {
        "setup_s": round(setup_s, 1),
        "run_s": round(run.run_s, 1),
        "computed": run.computed,
        "rejudged": run.rejudged,
        "cached": sum(plan.cached.values()),
        "stale_rerun": sum(plan.stale.values()),
        "rollouts_per_minute": round(rate, 2) if rate is not None else None,
        "questions_per_minute": round(rate / per_q, 2) if rate is not None else None,
    }
    report = build_report(
        records,
        settings=settings,
        datasets=list(inputs.data),
        hygiene=inputs.hygiene,
        bank=inputs.bank_info,
        timing=timing,
        aborted=run.aborted,
        planned=len(plan.keys),
        answerability=reach,
        data=inputs.data,
        no_oracle_doc=plan.no_oracle_doc,
    )
    write_report(settings.out_dir, report)
    return report


def _close(memories: dict[str, Any], clients: _Clients) -> None:
    if "on" in memories:  # 'on' and 'placebo' share one read-only bank
        memories["on"].bank.close()
    if clients.owned_policy:
        getattr(clients.policy, "close", lambda: None)()
    for client in clients.judge_models.values():
        getattr(client, "close", lambda: None)()
