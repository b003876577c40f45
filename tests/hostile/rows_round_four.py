"""Round four's classes, as rows: what a served graph's request may name (files, models, servers, how many
models stay loaded), values forged in the coordinator's store, a coordinator beyond loopback without a secret,
skill credits of a step run twice, a search backend that died, a trajectory shard of an older schema."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from tests.hostile.harness import Outcome, custom

AREA = "round four"


@contextmanager
def _env(**values: str | None) -> Any:
    """The environment with ``values`` set (None: unset), restored whole afterwards."""
    with mock.patch.dict(os.environ):
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield


def _refused(fn: Any, *names: str, leak: str | None = None) -> Outcome:
    """clear when ``fn()`` raises a ValueError naming every one of ``names`` (and not quoting ``leak``)."""
    try:
        fn()
    except ValueError as exc:
        msg = str(exc)
        missing = [n for n in names if n not in msg]
        if leak is not None and leak in msg:
            return Outcome("wrong", f"the message quotes the file: {msg[:200]}")
        return (
            Outcome("unclear", f"misses {missing}: {msg[:200]}") if missing else Outcome("clear", msg[:160])
        )
    return Outcome("wrong", "accepted")


def _served_path(field: str, path: str) -> Outcome:
    from graphs.studio_config import coerce

    with _env(SESA_SERVE_ROOTS=None):
        return _refused(lambda: coerce({field: path}), f"'{field}'", "SESA_SERVE_ROOTS")


@custom(AREA, "served context: a run_config outside the server's roots (/etc/passwd)")
def served_run_config(tmp: Path) -> Outcome:
    return _served_path("run_config", "/etc/passwd")


@custom(AREA, "served context: a corpus reached through '..' from the project")
def served_corpus_dotdot(tmp: Path) -> Outcome:
    from graphs.serve_limits import PROJECT

    return _served_path("corpus", str(PROJECT / ".." / ".." / ".." / "etc" / "hostname"))


@custom(AREA, "served context: a bank under an allowed root that links out of it")
def served_bank_link(tmp: Path) -> Outcome:
    from graphs import serve_limits

    root = tmp / "allowed"
    root.mkdir()
    (root / "bank").symlink_to("/etc")
    with _env(SESA_SERVE_ROOTS=str(root)):
        return _refused(
            lambda: serve_limits.check_real("bank", str(root / "bank")), "'bank'", "SESA_SERVE_ROOTS"
        )


@custom(AREA, "served context: a hub id the server's operator did not list")
def served_hub_id(tmp: Path) -> Outcome:
    from graphs import serve_limits

    with _env(SESA_SERVE_MODELS=None):
        return _refused(
            lambda: serve_limits.check_model_real("someone/huge-model"), "'model'", "SESA_SERVE_MODELS"
        )


@custom(AREA, "served context: a search_url on another host")
def served_remote_url(tmp: Path) -> Outcome:
    from graphs.studio_config import coerce

    with _env(SESA_SERVE_HOSTS=None):
        return _refused(
            lambda: coerce({"search_url": "http://169.254.169.254/latest"}),
            "'search_url'",
            "SESA_SERVE_HOSTS",
        )


@custom(AREA, "served context: a third model while two stay loaded")
def served_model_cap(tmp: Path) -> Outcome:
    import asyncio

    from graphs import defaults

    saved = (defaults._built, defaults._policy, defaults._search)
    defaults._built, defaults._policy, defaults._search = {}, (lambda *a: object()), (lambda *a: object())
    try:
        with _env(SESA_SERVE_MAX_MODELS=None):
            for model in ("embedded", "embedded-warm"):
                asyncio.run(defaults.parts({"engine": "local", "model": model}))
            return _refused(
                lambda: asyncio.run(defaults.parts({"engine": "local", "model": "qwen2.5-coder-0.5b"})),
                "SESA_SERVE_MAX_MODELS",
            )
    finally:
        defaults._built, defaults._policy, defaults._search = saved


def _coordinator() -> Any:
    from sesa_graph.cluster_config import ClusterConfig
    from training.coordinator import Coordinator

    return Coordinator(ClusterConfig(heartbeat_s=0.2, node_timeout_s=5), "name: hostile\n", {})


def _intruder(port: int) -> Any:
    from datetime import timedelta

    from torch.distributed import TCPStore

    return TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False, timeout=timedelta(seconds=5))


@custom(AREA, "coordinator: a rewritten run config (a launcher that runs /bin/sh) with the token set")
def forged_config(tmp: Path) -> Outcome:
    from training.coordinator import TrainerLink
    from training.signed_store import ForgedValueError

    with _env(SESA_COORDINATOR_TOKEN="hostile-suite-secret"):
        coord = _coordinator()
        try:
            _intruder(coord.port).set(
                "config", "train: {trainer_launcher: [torchrun, --no-python, /bin/sh]}\n"
            )
            link = TrainerLink(coord.address, "solver", connect_timeout_s=5)
            try:
                got = link.config_yaml()
            except ForgedValueError as exc:
                ok = "'config'" in str(exc) and "SESA_COORDINATOR_TOKEN" in str(exc)
                return Outcome("clear" if ok else "unclear", str(exc)[:160])
            return Outcome("wrong", f"the trainer read the forged config: {got[:80]}")
        finally:
            coord.close()


@custom(AREA, "coordinator: a forged weights path in ready/solver/0 with the token set")
def forged_ready(tmp: Path) -> Outcome:
    from training.signed_store import ForgedValueError

    with _env(SESA_COORDINATOR_TOKEN="hostile-suite-secret"):
        coord = _coordinator()
        try:
            msg = {"step": 0, "weights": {"kind": "file", "path": "/tmp/evil", "version": 0}}
            _intruder(coord.port).set("ready/solver/0", json.dumps(msg))
            try:
                got = coord.ready("solver", 0)
            except ForgedValueError as exc:
                return Outcome("clear" if "'ready/solver/0'" in str(exc) else "unclear", str(exc)[:160])
            return Outcome("wrong", f"the orchestrator took {got}")
        finally:
            coord.close()


@custom(AREA, "coordinator: a non-loopback address and no SESA_COORDINATOR_TOKEN")
def remote_without_token(tmp: Path) -> Outcome:
    from tools.errors import UserError
    from training.coordinator import open_store

    with _env(SESA_COORDINATOR_TOKEN=None):
        try:
            open_store("10.20.30.40", 29530, False, 1.0)
        except UserError as exc:
            return Outcome("clear" if "SESA_COORDINATOR_TOKEN" in str(exc) else "unclear", str(exc)[:160])
        return Outcome("wrong", "connected without a token")


@custom(AREA, "skill bank: a step's credits applied again after a resume", timeout_s=120)
def credits_twice(tmp: Path) -> Outcome:
    from sesa_graph.memory import MemoryConfig, SkillBank

    bank = SkillBank.create(tmp / "bank", MemoryConfig(), None)
    try:
        outcomes = [(["seed-dates-exact"], True, "answered")] * 3
        bank.apply_outcomes(outcomes, step=5)
        bank.apply_outcomes(outcomes, step=5)
        helpful = bank.get("seed-dates-exact").helpful
    finally:
        bank.close()
    return Outcome("handled") if helpful == 3 else Outcome("wrong", f"helpful {helpful}, credited twice")


@custom(AREA, "search: every search of a step failed and the server is gone")
def dead_search(tmp: Path) -> Outcome:
    import socket
    from types import SimpleNamespace

    from tools.backends import SearchUnavailableError
    from tools.http import HttpBackend
    from training.search_health import check_search_alive

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    failed = [SimpleNamespace(status="search_error")] * 4
    try:
        check_search_alive(HttpBackend(url, timeout_s=1, retries=0), len(failed), step=2)
    except SearchUnavailableError as exc:
        ok = url in str(exc) and "--resume" in str(exc)
        return Outcome("clear" if ok else "unclear", str(exc)[:160])
    return Outcome("wrong", "the step went on")


@custom(AREA, "trajectories: a shard of an older schema (a null-typed column, a column missing)")
def old_shard(tmp: Path) -> Outcome:
    import pandas as pd

    from sesa_graph.trajectory import Trajectory
    from training.store import TrajectoryStore

    row = Trajectory(
        role="solver",
        question_id="q",
        group_id="g",
        prompt_ids=[1],
        completion_ids=[2],
        env_mask=[1],
        logprobs=[-0.1],
        status="answered",
    ).model_dump()
    store = TrajectoryStore(tmp)
    path = store.path(0, "solver")
    path.parent.mkdir(parents=True)
    frame = pd.DataFrame([row]).drop(columns=["reused"])
    frame["success_rate"] = None
    frame.to_parquet(path, index=False)
    df = store.read(0, "solver")
    if df["reused"].isna().all() and df["success_rate"].isna().all() and len(df) == 1:
        return Outcome("handled")
    return Outcome("wrong", str(df.dtypes.to_dict())[:200])


ROWS = [
    served_run_config,
    served_corpus_dotdot,
    served_bank_link,
    served_hub_id,
    served_remote_url,
    served_model_cap,
    forged_config,
    forged_ready,
    remote_without_token,
    credits_twice,
    dead_search,
    old_shard,
]
