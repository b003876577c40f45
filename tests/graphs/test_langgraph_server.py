"""The graphs served by a LangGraph API server (``langgraph dev``, as LangGraph Studio talks to it): their
context is a JSON :class:`~graphs.studio_config.StudioConfig`, their schemas render, and a real server runs
``solve`` and ``propose`` to the end through ``langgraph_sdk``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from graphs import defaults
from graphs.propose import graph as propose_graph
from graphs.selfplay import graph as selfplay_graph
from graphs.solve import graph as solve_graph
from graphs.studio_config import StudioConfig, coerce
from sesa_graph.config import load_config
from tools.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = ROOT / ".venv-studio" / "bin" / "langgraph"
ENDED = {"answered", "malformed", "max_turns", "max_tokens", "search_error"}

# the smallest real rollouts: the in-process engine, the base model (the warm one may not be built), one
# short turn (plus the last-chance turn), no RAG check; one torch thread, since on a CPU shared with busy
# processes two made this test 94-205 s instead of 17 s
TINY = """\
solver_policy: {model: embedded, backend: local, threads: 1}
proposer_policy: {model: embedded, backend: local, threads: 1}
solver: {max_turns: 1, max_tokens_per_turn: 8, max_total_tokens: 1024}
proposer: {max_turns: 1, max_tokens_per_turn: 8, rag_check: false}
judge: {kind: none}
"""


def test_every_graph_has_renderable_schemas():
    for graph in (solve_graph, propose_graph, selfplay_graph):
        context = graph.get_context_jsonschema()
        assert set(context["properties"]) == set(StudioConfig.model_fields)
        assert graph.get_input_jsonschema()["properties"]
        assert "status" in graph.get_output_jsonschema()["properties"] or graph is selfplay_graph
    assert set(solve_graph.get_input_jsonschema()["properties"]) == {"question", "skills_block"}
    assert set(propose_graph.get_input_jsonschema()["properties"]) == {"target", "hops", "examples"}
    assert "target" in selfplay_graph.get_input_jsonschema()["properties"]
    assert "proposer_reward" in selfplay_graph.get_output_jsonschema()["properties"]


def test_an_empty_configuration_is_the_run_configs():
    cfg = load_config(None)
    studio = coerce({})
    assert studio == coerce(None) == StudioConfig()
    assert studio.policy_config(cfg) == cfg.solver_policy
    assert studio.search_config(cfg) == cfg.search
    assert studio.overrides() == {}


def test_a_configuration_overrides_what_it_names():
    cfg = load_config(None)
    studio = coerce({"model": "m", "base_url": "http://127.0.0.1:9/v1", "corpus": "c.jsonl", "max_turns": 2})
    pcfg = studio.policy_config(cfg)
    assert (pcfg.model, pcfg.backend, pcfg.base_url) == ("m", "openai", "http://127.0.0.1:9/v1")
    assert StudioConfig(engine="local").policy_config(cfg).backend == "local"
    assert studio.search_config(cfg).corpus == "c.jsonl"
    assert studio.search_config(cfg).backend == cfg.search.backend
    assert load_config(None, studio.overrides()).proposer.max_turns == 2
    with pytest.raises(ValueError):
        coerce({"max_turn": 2})  # a typo is an error, not the default


def test_a_misspelled_context_key_is_refused_naming_it_and_the_known_ones():
    from types import SimpleNamespace

    from graphs import served

    with pytest.raises(ValueError, match=r"'max_turn' \(did you mean 'max_turns'\?\); .*run_config, model"):
        coerce({"max_turn": 2})
    # the served graphs' factories see the context before langgraph-api drops the keys it does not know
    with pytest.raises(ValueError, match="unknown context key 'modle'"):
        served.solve(SimpleNamespace(context={"modle": "x"}))
    assert served.propose(SimpleNamespace()) is propose_graph  # a schema read: no context
    # what the server mirrors from config.configurable is its own plumbing, not a setting
    assert coerce({"thread_id": "t", "langgraph_request_id": "r", "max_turns": 2}).max_turns == 2


def test_parts_are_built_once_per_configuration_off_the_event_loop(monkeypatch):
    monkeypatch.setattr(defaults, "_built", {})
    builds: list[tuple[str, str]] = []

    def fake(kind):
        def build(*args):
            builds.append((kind, threading.current_thread().name))
            return object()

        return build

    monkeypatch.setattr(defaults, "_policy", fake("policy"))
    monkeypatch.setattr(defaults, "_search", fake("search"))

    async def main():
        a = await asyncio.gather(*(defaults.parts({"engine": "local"}) for _ in range(3)))
        b = await defaults.parts({"engine": "local", "max_turns": 1})  # budgets only: same policy and search
        c = await defaults.parts({"engine": "local", "model": "other"})
        return a, b, c

    (a1, a2, a3), b, c = asyncio.run(main())
    assert a1[1] is a2[1] is a3[1] is b[1] and c[1] is not a1[1]
    assert a1[2] is b[2] is c[2]
    assert b[0].solver.max_turns == 1 != a1[0].solver.max_turns
    assert sorted(k for k, _ in builds) == ["policy", "policy", "search"]
    assert all(t.startswith("sesa-graph-build") for _, t in builds)


def test_a_failed_build_is_tried_again(monkeypatch):
    monkeypatch.setattr(defaults, "_built", {})
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("endpoint down")
        return "ok"

    # an OSError (a model that does not load) reaches the server as a RuntimeError with its message, which
    # langgraph-api shows (it hides the message of an OSError)
    with pytest.raises(
        defaults.ServedBuildError, match="building the x failed: ConnectionError: endpoint down"
    ):
        asyncio.run(defaults._acached(("x",), flaky))
    assert asyncio.run(defaults._acached(("x",), flaky)) == "ok"
    assert asyncio.run(defaults._acached(("x",), flaky)) == "ok" and len(calls) == 2


# ---- a real server ------------------------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path):
    """``langgraph dev`` on a free loopback port, in its own process group, stopped on every exit."""
    if not LANGGRAPH.exists():
        pytest.fail(f"{LANGGRAPH} is missing: `bash scripts/setup.sh dev` (or `studio`) makes .venv-studio")
    port = free_port()
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        SESA_SERVE_ROOTS=str(tmp_path),  # the test's run config and model paths live there
    )
    log = tmp_path / "server.log"
    args = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)]
    # the checkout's langgraph.json with its paths made absolute: the server resolves them against its working
    # directory, and that is the test's, where its state (.langgraph_api/) goes instead of the checkout
    spec = json.loads((ROOT / "langgraph.json").read_text())
    spec["dependencies"] = [str(ROOT / d) for d in spec["dependencies"]]
    spec["graphs"] = {name: str(ROOT / path) for name, path in spec["graphs"].items()}
    (tmp_path / "langgraph.json").write_text(json.dumps(spec))
    args += ["--config", str(tmp_path / "langgraph.json")]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(proc, url, log)
        yield url
    finally:
        _stop(proc)


def _wait_ready(proc: subprocess.Popen, url: str, log: Path, limit_s: float = 180.0) -> None:
    import httpx

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"langgraph dev exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"langgraph dev did not answer /ok within {limit_s:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


async def _run(client, graph: str, inp: dict, context: dict) -> tuple[dict, dict, list[str]]:
    """(the run, the final state, the nodes streamed) of one run on a new thread."""
    thread = await client.threads.create()
    nodes = []
    async for chunk in client.runs.stream(
        thread["thread_id"], graph, input=inp, context=context, stream_mode="updates"
    ):
        if chunk.event == "updates":
            nodes += list(chunk.data)
        assert chunk.event != "error", chunk.data
    (run,) = await client.runs.list(thread["thread_id"])
    state = await client.threads.get_state(thread["thread_id"])
    return run, state["values"], nodes


@pytest.mark.slow
def test_solve_and_propose_run_on_a_langgraph_server(server, tmp_path):
    from langgraph_sdk import get_client

    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    context = {"run_config": str(config)}

    async def main():
        client = get_client(url=server)
        schemas = []
        for g in ("solve", "propose", "selfplay"):  # the graphs' default assistants, as Studio lists them
            (assistant,) = await client.assistants.search(graph_id=g)
            schemas.append(await client.assistants.get_schemas(assistant["assistant_id"]))
        # two rollouts at once, as Studio users start them: they share the one in-process policy
        solve, propose = await asyncio.gather(
            _run(client, "solve", {"question": "Who wrote Faust?"}, context),
            _run(client, "propose", {"target": "Goethe", "hops": 1}, context),
        )
        thread = await client.threads.create()
        missing = {"run_config": str(tmp_path / "missing.yaml")}
        bad = await client.runs.create(
            thread["thread_id"], "solve", input={"question": "Q?"}, context=missing
        )
        await client.runs.join(thread["thread_id"], bad["run_id"])
        # a misspelled key and a model that does not load: errors whose message the caller (Studio) sees
        refused = []
        for ctx in (
            {**context, "max_turn": 2},
            {**context, "engine": "local", "model": str(tmp_path / "none")},
            # a file outside the server's roots and a server off this machine (graphs.serve_limits)
            {**context, "corpus": "/etc/hostname"},
            {**context, "search_backend": "http", "search_url": "http://10.1.2.3:8000"},
        ):
            t = await client.threads.create()
            r = await client.runs.create(t["thread_id"], "solve", input={"question": "Q?"}, context=ctx)
            refused.append(await client.runs.join(t["thread_id"], r["run_id"]))
        broken = await client.runs.get(thread["thread_id"], bad["run_id"])
        # the self-play step graph too: a proposal, its solver group (of 2), the judge and the rewards
        selfplay = await _run(
            client, "selfplay", {"target": "Goethe", "hops": 1}, {**context, "group_size": 2}
        )
        return schemas, solve, propose, broken, refused, selfplay

    schemas, (run, out, nodes), (prun, pout, pnodes), broken, refused, selfplay = asyncio.run(main())
    srun, sout, snodes = selfplay
    assert srun["status"] == "success" and "score" in snodes, (srun, snodes)
    assert isinstance(sout["proposer_reward"], float)
    typo, no_model, outside, remote = (json.dumps(r) for r in refused)
    assert "context key 'corpus'" in outside and "SESA_SERVE_ROOTS" in outside, outside
    assert "hostname" not in outside.replace("/etc/hostname", ""), outside  # nothing of the file was read
    assert "context key 'search_url'" in remote and "SESA_SERVE_HOSTS" in remote, remote
    assert "unknown context key 'max_turn' (did you mean 'max_turns'?)" in typo, typo
    assert str(tmp_path / "none") in no_model and "internal error" not in no_model, no_model
    assert all(s["input_schema"] and s["context_schema"] for s in schemas)
    assert run["status"] == "success" and out["status"] in ENDED and out["n_turns"] >= 1
    assert len(out["turns"]) == out["n_turns"] <= 2  # the run config's one turn, plus the last-chance one
    assert nodes[0] == "start" and "agent" in nodes
    assert prun["status"] == "success" and pout["status"] in ENDED and isinstance(pout["valid"], bool)
    assert pnodes[-1] == "validate"
    # the context reaches the builder: a run config that does not exist fails the run
    assert broken["status"] == "error"


def test_the_served_selfplay_judge_starts_the_fixed_model_or_falls_back_and_says_so(monkeypatch, caplog):
    """Studio's selfplay on the default config failed in 1 s: "judge kind 'model' names model 'qwen', which
    was not started here". The judge is now made as a run makes it."""
    from sesa_graph.policy import factory

    cfg = load_config(None)
    assert cfg.judge.kind == "model" and cfg.judge.fallback == "exact"
    started = []

    def no_llama(models, names, **kw):
        started.append(list(names))
        raise RuntimeError("llama-cpp-python is not installed (scripts/llama_cpp_build.sh)")

    monkeypatch.setattr(factory, "make_fixed_models", no_llama)
    monkeypatch.setattr("sesa_graph.fixed_models.judge_with_fallback", lambda j, m: (j, None))
    with caplog.at_level("WARNING", logger="sesa.served"):
        judge = defaults._judge(cfg, policy=None)
    assert started == [[cfg.judge.endpoint]]  # it tried to start the model, as `sesa train` would
    assert judge.model is None  # exact match alone
    assert "judging by exact match alone" in caplog.text and "llama-cpp-python" in caplog.text
    from types import SimpleNamespace

    chat = SimpleNamespace(ainvoke=None)  # a started model's client, as make_judge takes it
    monkeypatch.setattr(factory, "make_fixed_models", lambda models, names, **kw: dict.fromkeys(names, chat))
    assert defaults._judge(cfg, policy=None).model is chat
