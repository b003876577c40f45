"""Run-time contexts for graphs run without one built by the caller: a LangGraph server (``langgraph dev``,
Studio, a deployment), which passes a :class:`~graphs.studio_config.StudioConfig` (or nothing).

The live parts (run config, policy, search backend, bank) are built once per distinct configuration and
shared by every later run that asks for the same. They are built on one worker thread, never on the
server's event loop: loading a model or an index reads files and may start a vLLM server for a minute,
which would stall every other run (and trips ``langgraph dev``'s blocking-call guard).

:func:`node_context` is how the nodes of all three graphs reach their context, the caller's or a served one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from langgraph.runtime import Runtime

from graphs import contexts, serve_limits
from graphs.studio_config import StudioConfig, coerce

C = TypeVar("C")
log = logging.getLogger("sesa.served")

# one thread: two models loading at once on a small machine only slows both and doubles the peak memory
_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sesa-graph-build")
_built: dict[tuple, Future] = {}
_lock = threading.Lock()


# parts that hold a model, an index or a server, kept for the server's life: capped (SESA_SERVE_MAX_MODELS)
HEAVY = ("policy", "search", "judge")
# parts that are only data (a parsed config, a bank's read-only view): the oldest are dropped past this many
LIGHT_KEPT = 16


def _future(key: tuple, build: Callable[[], Any]) -> Future:
    with _lock:
        fut = _built.get(key)
        if fut is None:
            _make_room(key[0])
            fut = _built[key] = _pool.submit(build)
        else:
            _built[key] = _built.pop(key)  # most recently used last
    return fut


def _make_room(kind: str) -> None:
    """Before a new part of ``kind`` is built (under the lock): refuse a heavy one past the cap, drop the
    least recently used light one past LIGHT_KEPT."""
    same = [k for k in _built if k[0] == kind]
    if kind in HEAVY:
        cap = serve_limits.max_models()
        if len(same) >= cap:
            raise ValueError(
                f"this server already holds {len(same)} {kind} configurations, its limit "
                f"(SESA_SERVE_MAX_MODELS={cap}): use one of those (the same model, corpus and engine), or "
                "restart the server with a higher SESA_SERVE_MAX_MODELS where it has the memory"
            )
    elif len(same) >= LIGHT_KEPT:
        del _built[same[0]]


def _cached(key: tuple, build: Callable[[], Any]) -> Any:
    """``build()`` once per ``key`` (blocking; for callers that are not on an event loop)."""
    return _settle(key, _future(key, build)).result()


class ServedBuildError(RuntimeError):
    """Building a served run's part failed. A RuntimeError on purpose: langgraph-api shows a run's error
    message only for a few builtin types (ValueError, RuntimeError, ...) and replaces any other -- the OSError
    of a model that does not load, a UserError naming a bad path -- with "An internal error occurred"."""


async def _acached(key: tuple, build: Callable[[], Any]) -> Any:
    fut = _future(key, build)
    try:
        # shielded: a cancelled run must not cancel a build other runs wait for
        return await asyncio.shield(asyncio.wrap_future(fut))
    except Exception as exc:
        _settle(key, fut)
        if isinstance(exc, ValueError | TypeError | KeyError | RuntimeError):
            raise
        raise ServedBuildError(f"building the {key[0]} failed: {type(exc).__name__}: {exc}") from exc


def _settle(key: tuple, fut: Future) -> Future:
    """A failed build is forgotten, so the next run with that configuration tries again."""
    if fut.done() and fut.exception() is not None:
        with _lock:
            if _built.get(key) is fut:
                del _built[key]
    return fut


def _run_config(studio: StudioConfig) -> Any:
    from sesa_graph.config import load_config

    if studio.run_config is not None:
        serve_limits.check_real("run_config", studio.run_config)
    return load_config(studio.run_config, studio.overrides())


def _policy(pcfg: Any, asked: str | None = None) -> Any:
    """``asked``: the context's own ``model`` (not the run config's), checked before it loads."""
    from sesa_graph.policy.factory import make_policy

    if asked is not None and pcfg.backend != "openai":
        serve_limits.check_model_real(asked)
    return make_policy(pcfg)


def _search(scfg: Any, asked: str | None = None) -> Any:
    """``asked``: the context's own ``corpus``, checked before it is read."""
    from tools.backends import make_backend

    if asked is not None and asked != "embedded":
        serve_limits.check_real("corpus", asked)
    return make_backend(scfg)


def _memory(bank: str, mode: str, top_k: int) -> Any:
    """A read-only view of a bank: skills are retrieved (or drawn, for 'placebo'), never credited."""
    from sesa_graph.memory.bank import SkillBank
    from sesa_graph.memory.config import MemoryConfig
    from sesa_graph.memory.memory import SkillMemory
    from sesa_graph.memory.snapshot import bank_dir, read_state

    serve_limits.check_real("bank", bank)
    path = bank_dir(Path(bank))
    state = read_state(path)
    cfg = MemoryConfig(
        mode="static" if mode == "on" else mode,
        embedder=state["embedder"],
        top_k=top_k,
        chroma_host=state.get("chroma_host"),
    )
    return SkillMemory(cfg, SkillBank.open(path, cfg, None, read_only=True), None)


async def parts(raw: Any) -> tuple[Any, Any, Any, Any]:
    """(run config, policy, search backend, skill memory or None) for a served run's context."""
    studio = coerce(raw)
    cfg = await _acached(
        ("config", studio.run_config, tuple(sorted(studio.overrides().items()))), lambda: _run_config(studio)
    )
    pcfg, scfg = studio.policy_config(cfg), studio.search_config(cfg)
    policy = await _acached(("policy", pcfg.model_dump_json()), lambda: _policy(pcfg, studio.model))
    search = await _acached(("search", scfg.model_dump_json()), lambda: _search(scfg, studio.corpus))
    memory = None
    if studio.bank and studio.bank_mode != "off":
        top_k = cfg.memory.top_k
        memory = await _acached(
            # the path as given: resolving it would touch the file system on the event loop
            ("bank", studio.bank, studio.bank_mode, top_k),
            lambda: _memory(studio.bank, studio.bank_mode, top_k),
        )
    return cfg, policy, search, memory


async def served_solver_context(raw: Any) -> Any:
    studio = coerce(raw)
    cfg, policy, search, _ = await parts(studio)
    return contexts.solver_context(cfg.solver, policy, search, greedy=studio.greedy, seed=studio.seed)


async def served_propose_context(raw: Any) -> Any:
    studio = coerce(raw)
    cfg, policy, search, _ = await parts(studio)
    return contexts.propose_context(cfg, policy, search, judge=policy, seed=studio.seed)


async def served_skills(raw: Any, question: str) -> str | None:
    """The rendered skills the configured bank gives ``question`` (None without a bank, and for a caller's
    own rollout context, whose skills come in the graph's state)."""
    if isinstance(raw, contexts.RolloutContext):
        return None
    memory = (await parts(raw))[3]
    if memory is None:
        return None
    (hits,) = await asyncio.to_thread(memory.retrieve, [question])
    return memory.render(hits) or None


def _judge(cfg: Any, policy: Any) -> Any:
    """The run config's judge, as a run makes it: a fixed model is started (a missing one moves to
    ``judge.fallback`` with a note, as ``sesa train`` does); one that cannot start falls back to exact match
    when ``judge.fallback`` is 'exact', and says so in the server's log."""
    from sesa_graph.fixed_models import judge_with_fallback
    from sesa_graph.policy.factory import make_fixed_models, make_judge

    jcfg, note = judge_with_fallback(cfg.judge, cfg.models)
    if note:
        log.warning("served selfplay: %s", note)
    if jcfg.kind != "model":
        return make_judge(jcfg, policy)
    try:
        models = make_fixed_models(cfg.models, [jcfg.endpoint])
    except Exception as exc:  # a model server that does not start: the configured fallback
        if jcfg.fallback != "exact":
            raise
        log.warning(
            "served selfplay: the judge's model %r did not start (%s); judging by exact match alone "
            "(judge.fallback: exact)",
            jcfg.endpoint,
            str(exc).splitlines()[0],
        )
        return make_judge(jcfg.model_copy(update={"kind": "none"}), policy)
    return make_judge(jcfg, policy, models=models)


async def served_selfplay_context(raw: Any) -> contexts.SelfPlayContext:
    studio = coerce(raw)
    cfg, policy, _, memory = await parts(studio)
    sampled = studio.model_copy(update={"greedy": False})  # a group of greedy rollouts would be G copies
    key = ("judge", cfg.judge.model_dump_json(), studio.policy_config(cfg).model_dump_json())
    judge = await _acached(key, lambda: _judge(cfg, policy))
    return contexts.SelfPlayContext(
        proposer=await served_propose_context(studio),
        solver=await served_solver_context(sampled),
        judge=judge,
        group_size=cfg.solver.group_size,
        rewards=cfg.rewards,
        memory=memory,
    )


def node_context(
    live: type[C], served: Callable[[Any], Awaitable[C]]
) -> Callable[[Runtime[Any]], Awaitable[C]]:
    """How a graph's nodes reach their context: the caller's own ``live`` context, which LangGraph hands
    through as it is, or, on a LangGraph server, the one ``served`` builds from the configuration it sent."""

    async def context(runtime: Runtime[Any]) -> C:
        if isinstance(runtime.context, live):
            return runtime.context
        return await served(runtime.context)

    return context


# ---- the same, blocking, for callers outside an event loop (notebooks, tests) ------------------------------


def _parts() -> tuple[Any, Any, Any]:
    studio = StudioConfig()
    cfg = _cached(("config", None, ()), lambda: _run_config(studio))
    pcfg, scfg = studio.policy_config(cfg), studio.search_config(cfg)
    policy = _cached(("policy", pcfg.model_dump_json()), lambda: _policy(pcfg))
    return cfg, policy, _cached(("search", scfg.model_dump_json()), lambda: _search(scfg))


def solver_context() -> Any:
    cfg, policy, search = _parts()
    return contexts.solver_context(cfg.solver, policy, search, greedy=True)


def propose_context() -> Any:
    cfg, policy, search = _parts()
    return contexts.propose_context(cfg, policy, search, judge=policy)
