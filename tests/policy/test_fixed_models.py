"""Fixed models (judge, distiller, RAG reader): building them from `models:`, each role's chat-template
arguments, the /v1/chat/completions client, the warning when a role is the policy being trained, and -- on the
real embedded model with a thinking template -- a judge cut off in <think> versus one told not to think."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI, Request

from sesa_graph import prompts
from sesa_graph.config import JudgeConfig, RunConfig
from sesa_graph.model_config import EndpointConfig, PolicyConfig
from sesa_graph.policy import factory
from sesa_graph.policy.base import GenerationRequest, GenerationResult, PolicyClient, SamplingParams
from sesa_graph.policy.templated import ChatEndpoint, TemplatedPolicy, for_role
from sesa_graph.rollout.judge import Judge

sys.path.insert(0, str(Path(__file__).parent))  # thinking_model.py

from thinking_model import thinking_model_dir


class RecordingTokenizer:
    """Renders a chat as ids [len(messages), 1 if enable_thinking else 0] and records the template kwargs."""

    def __init__(self):
        self.kwargs = []

    def apply_chat_template(self, messages, add_generation_prompt, tokenize, **kwargs):
        self.kwargs.append(kwargs)
        return {"input_ids": [len(messages), int(kwargs.get("enable_thinking", True))]}

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [7] * len(text.split())}

    def decode(self, ids):
        return "<|im_start|>assistant\n"


class FakeClient:
    """A PolicyClient recording its requests; ``close`` counts."""

    def __init__(self, name="fake", reply="Correct"):
        self.name = name
        self.tokenizer = RecordingTokenizer()
        self.reply = reply
        self.requests = []
        self.closed = 0

    def encode_messages(self, messages):
        return self.tokenizer.apply_chat_template(messages, True, True)["input_ids"]

    def encode_text(self, text):
        return self.tokenizer(text)["input_ids"]

    async def generate(self, requests):
        self.requests += requests
        return [GenerationResult(self.reply, [1], [0.0], list(r.prompt_ids or []), "eos") for r in requests]

    def close(self):
        self.closed += 1


# ---- the role wrapper ------------------------------------------------------------------------------------


def test_templated_policy_renders_messages_with_the_roles_kwargs():
    client = FakeClient()
    wrapped = TemplatedPolicy(client, {"enable_thinking": False})
    assert isinstance(wrapped, PolicyClient) and wrapped.name == "fake"
    assert wrapped.encode_messages([{"role": "user", "content": "hi"}]) == [1, 0]
    assert client.tokenizer.kwargs[-1] == {"enable_thinking": False}
    sp = SamplingParams(max_tokens=5, temperature=0.0)
    asyncio.run(
        wrapped.generate(
            [
                GenerationRequest(messages=[{"role": "user", "content": "q"}], sampling=sp),
                GenerationRequest(prompt_ids=[9, 9], sampling=sp),  # already tokens: passed unchanged
            ]
        )
    )
    assert [r.prompt_ids for r in client.requests] == [[1, 0], [9, 9]]
    assert all(r.messages is None and r.sampling is sp for r in client.requests)
    assert wrapped.encode_text("a b") == [7, 7]
    wrapped.close()  # the rest of the client is reachable (close, dead, ...)
    assert client.closed == 1


def test_for_role_leaves_a_client_without_kwargs_alone():
    client = FakeClient()
    assert for_role(client, {}) is client
    chat = ChatEndpoint("http://127.0.0.1:1/v1", "m")
    judge = for_role(chat, {"enable_thinking": False}, max_tokens=16, temperature=0.0)
    assert (judge.chat_template_kwargs, judge.max_tokens, judge.temperature) == (
        {"enable_thinking": False},
        16,
        0.0,
    )
    assert chat.chat_template_kwargs == {} and chat.max_tokens is None  # one copy per role


# ---- the chat-completions client ----------------------------------------------------------------------------


def _chat_app(reply: str, seen: list):
    app = FastAPI()

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": "judge-m", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        seen.append(body)
        return {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
            ],
        }

    return app


def test_chat_endpoint_passes_the_template_kwargs_and_judges():
    from langchain_core.messages import HumanMessage

    from tools.server import running_app

    seen: list = []
    with running_app(_chat_app("Correct", seen)) as url:
        ep = factory.endpoint_client("api", EndpointConfig(base_url=f"{url}/v1", model="judge-m", api="chat"))
        assert isinstance(ep, ChatEndpoint)
        judge = factory.make_judge(
            JudgeConfig(kind="model", endpoint="api", chat_template_kwargs={"enable_thinking": False}),
            policy=None,
            models={"api": ep},
        )
        v = asyncio.run(judge.judge("Who composed Salome?", "R. Strauss", ["Richard Strauss"]))
        reply = asyncio.run(ep.ainvoke([HumanMessage("hello")]))
    assert (v.method, v.correct) == ("llm", True)
    body = seen[0]
    assert body["model"] == "judge-m" and body["max_tokens"] == 16 and body["temperature"] == 0.0
    assert body["chat_template_kwargs"] == {"enable_thinking": False}  # extra_body lands in the body
    roles = [m["role"] for m in body["messages"]]
    assert roles[0] == "system" and roles[-1] == "user"  # an explicit system turn, the item last
    assert roles[1:-1] == ["user", "assistant"] * len(prompts.JUDGE_EXAMPLES)  # the worked examples between
    assert "R. Strauss" in body["messages"][-1]["content"]
    assert reply.text == reply.content == "Correct" and "chat_template_kwargs" not in seen[1]


def test_chat_endpoint_empty_reply_is_no_verdict():
    from tools.server import running_app

    seen: list = []
    with running_app(_chat_app("", seen)) as url:  # a reasoning parser kept everything in reasoning_content
        judge = Judge(ChatEndpoint(f"{url}/v1", "judge-m"))
        v = asyncio.run(judge.judge("q", "Milan", ["Rome"]))
    assert v.method == "judge_unavailable" and judge.unavailable_count == 1


def test_a_dead_endpoint_fails_at_start(monkeypatch):
    monkeypatch.setattr(factory.time, "sleep", lambda s: None)
    with pytest.raises(factory.PolicyUnavailableError, match="model 'big'"):
        factory.make_fixed_models(
            {"big": EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m")}, ["big"]
        )


def test_an_unset_api_key_variable_is_an_error(monkeypatch):
    monkeypatch.setattr(factory, "probe_endpoint", lambda *a, **k: None)
    monkeypatch.delenv("SESA_TEST_NO_SUCH_KEY", raising=False)
    ep = EndpointConfig(base_url="http://x/v1", model="m", api="chat", api_key_env="SESA_TEST_NO_SUCH_KEY")
    with pytest.raises(ValueError, match="SESA_TEST_NO_SUCH_KEY"):
        factory.endpoint_client("big", ep)


# ---- starting fixed models ----------------------------------------------------------------------------------


class FakeServer:
    def __init__(self, pid):
        self.proc = SimpleNamespace(pid=pid)


def _fake_make_policies(started: list):
    def make(specs, owner=None, gpus=None):
        started.append((specs, owner, gpus))
        out = []
        for i, (cfg, _, _) in enumerate(specs):
            client = FakeClient(cfg.model)
            if cfg.backend == "vllm":
                client.server = FakeServer(1000 + i)
            out.append(client)
        return out

    return make


def test_served_models_start_side_by_side_with_the_policies(monkeypatch, tmp_path):
    started: list = []
    monkeypatch.setattr(factory, "make_policies", _fake_make_policies(started))
    monkeypatch.setattr(factory, "endpoint_client", lambda name, ep: FakeClient(f"endpoint:{ep.model}"))
    models = {
        "big": EndpointConfig(serve=PolicyConfig(model="Qwen/Qwen3-8B"), cuda_visible_devices="7"),
        "api": EndpointConfig(base_url="http://h/v1", model="ds", api="chat"),
        "frozen": EndpointConfig(serve=PolicyConfig(model="embedded-warm", backend="local")),
    }
    policy_specs = [(PolicyConfig(model="solver"), None, None), (PolicyConfig(model="proposer"), None, None)]
    policies, fixed = factory.start_models(
        policy_specs, models, owner="/run", policy_gpus=["0", "1"], log_dir=tmp_path
    )
    ((specs, owner, gpus),) = started  # one call: every server starts side by side
    assert [c.model for c, _, _ in specs] == ["solver", "proposer", "Qwen/Qwen3-8B", "embedded-warm"]
    assert gpus == ["0", "1", "7", None] and owner == "/run"
    assert specs[2][2] == tmp_path / "model-big-vllm.log"
    assert [p.name for p in policies] == ["solver", "proposer"]
    assert list(fixed) == ["big", "api", "frozen"] and fixed["api"].name == "endpoint:ds"
    assert fixed["big"].server.proc.pid == 1002


def test_a_failed_endpoint_stops_the_servers_already_started(monkeypatch):
    started: list = []
    made: list = []

    def make(specs, owner=None, gpus=None):
        out = _fake_make_policies(started)(specs, owner, gpus)
        made.extend(out)
        return out

    def dead(name, ep):
        raise factory.PolicyUnavailableError(f"model {name!r} endpoint does not answer")

    monkeypatch.setattr(factory, "make_policies", make)
    monkeypatch.setattr(factory, "endpoint_client", dead)
    models = {
        "big": EndpointConfig(serve=PolicyConfig(model="m")),
        "api": EndpointConfig(base_url="http://h/v1", model="ds"),
    }
    with pytest.raises(factory.PolicyUnavailableError, match="'api'"):
        factory.start_models([(PolicyConfig(model="solver"), None, None)], models)
    assert [c.closed for c in made] == [1, 1]


def test_serve_with_backend_openai_is_refused():
    with pytest.raises(ValueError, match="models.x.base_url"):
        factory.make_fixed_models(
            {"x": EndpointConfig(serve=PolicyConfig(backend="openai", base_url="http://h"))}, ["x"]
        )


def test_only_referenced_models_are_needed():
    models = {
        "frozen": EndpointConfig(serve=PolicyConfig(model="embedded-warm", backend="local")),
        "judge": EndpointConfig(base_url="http://h/v1", model="j"),
        "unused": EndpointConfig(base_url="http://h/v1", model="u"),
    }
    cfg = RunConfig(models=models, judge=JudgeConfig(kind="model", endpoint="judge"))
    assert factory.needed_models(cfg) == ["frozen", "judge"]  # default memory 'on' and rag_check
    cfg = RunConfig.model_validate(
        {
            "models": {k: v.model_dump() for k, v in models.items()},
            "memory": {"mode": "static"},
            "proposer": {"rag_check": False},
            "judge": {"kind": "none"},
        }
    )
    assert factory.needed_models(cfg) == []
    cfg = RunConfig(distiller={"endpoint": "policy"}, proposer={"rag_reader": {"endpoint": "policy"}})
    assert factory.needed_models(cfg) == []  # the policy is no fixed model to start


# ---- the policy as a role: allowed, warned ---------------------------------------------------------------------


def test_policy_roles_are_warned(caplog):
    policy = FakeClient("solver")
    with caplog.at_level(logging.WARNING, logger="sesa_graph.policy.factory"):
        judge = factory.make_judge(JudgeConfig(kind="policy"), policy)
    assert judge.model is policy
    assert "judge uses the solver policy being trained" in caplog.text and "grades itself" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sesa_graph.policy.factory"):
        distiller = factory.role_client("distiller", "policy", {"enable_thinking": False}, {}, policy)
    assert "teaches itself" in caplog.text
    assert isinstance(distiller, TemplatedPolicy) and distiller.client is policy


def test_make_judge_kinds(caplog):
    frozen = FakeClient("frozen")
    assert factory.make_judge(JudgeConfig(), policy=FakeClient()).model is None  # default: exact match only
    with caplog.at_level(logging.WARNING):
        judge = factory.make_judge(
            JudgeConfig(kind="model", chat_template_kwargs={"enable_thinking": False}, max_tokens=8),
            policy=FakeClient(),
            models={"frozen": frozen},
        )
    assert caplog.text == ""  # a fixed model is not warned about
    assert isinstance(judge.model, TemplatedPolicy) and judge.model.client is frozen and judge.max_tokens == 8
    v = asyncio.run(judge.judge("q", "Milan", ["Rome"]))
    assert v.method == "llm" and frozen.tokenizer.kwargs[-1] == {"enable_thinking": False}
    assert frozen.requests[0].sampling.max_tokens == 8
    with pytest.raises(ValueError, match="'frozen', which was not started"):
        factory.make_judge(JudgeConfig(kind="model"), policy=FakeClient(), models={})


# ---- the orchestrator's wiring ---------------------------------------------------------------------------------


def test_orchestrator_wires_roles_to_fixed_models(monkeypatch, tmp_path, caplog):
    import training.orchestrator as orch_mod

    solver, proposer, frozen = FakeClient("solver"), FakeClient("proposer"), FakeClient("frozen")
    frozen.server = FakeServer(4242)
    asked: dict = {}

    def fake_start(policy_specs, models, owner=None, policy_gpus=None, log_dir=None, policy_settings=None):
        asked.update(models=dict(models), owner=owner, settings=policy_settings)
        return [solver, proposer], {name: frozen for name in models}

    monkeypatch.setattr(orch_mod, "start_models", fake_start)
    cfg = RunConfig.model_validate(
        {
            "memory": {"mode": "static"},
            "judge": {"kind": "model", "chat_template_kwargs": {"enable_thinking": False}},
            "proposer": {"rag_reader": {"endpoint": "frozen", "chat_template_kwargs": {"x": 1}}},
        }
    )
    with caplog.at_level(logging.WARNING):
        orch = orch_mod.Orchestrator(cfg, tmp_path / "run")
    try:
        assert list(asked["models"]) == ["frozen"] and asked["owner"] == str((tmp_path / "run").resolve())
        assert asked["settings"] == ("solver_policy", "proposer_policy")  # named in their timeout errors
        assert json.loads((tmp_path / "run" / "sync" / "server_pids.json").read_text()) == {
            "model:frozen": 4242
        }
        assert orch.judge.model.client is frozen and orch.judge.model.chat_template_kwargs == {
            "enable_thinking": False
        }
        reader = orch.ctx.proposer.judge
        assert reader.client is frozen and reader.chat_template_kwargs == {"x": 1}
        assert "solver policy being trained" not in caplog.text
    finally:
        orch.memory.close()
        orch.close()
    assert (solver.closed, proposer.closed, frozen.closed) == (1, 1, 1)


def test_orchestrator_warns_for_a_policy_rag_reader(monkeypatch, tmp_path, caplog):
    import training.orchestrator as orch_mod

    solver = FakeClient("solver")
    monkeypatch.setattr(orch_mod, "start_models", lambda *a, **k: ([solver, FakeClient("proposer")], {}))
    cfg = RunConfig.model_validate(
        {"memory": {"mode": "static"}, "proposer": {"rag_reader": {"endpoint": "policy"}}}
    )
    with caplog.at_level(logging.WARNING):
        orch = orch_mod.Orchestrator(cfg, tmp_path / "run")
    try:
        assert orch.ctx.proposer.judge is solver and orch.judge.model is None
        assert "rag_reader uses the solver policy being trained" in caplog.text
    finally:
        orch.memory.close()
        orch.close()


# ---- the real model with a thinking chat template ----------------------------------------------------------------


@pytest.fixture(scope="module")
def thinking_policy():
    from sesa_graph.policy.local import LocalPolicy

    with tempfile.TemporaryDirectory() as tmp:
        yield LocalPolicy(str(thinking_model_dir(Path(tmp) / "thinking")), threads=2)


# near misses the embedded model judges when it does not think (it is a weak judge: it says Correct)
ITEMS = [
    ("Who composed Salome?", "R. Strauss", ["Richard Strauss"]),
    ("Who painted the Mona Lisa?", "Leonardo", ["Leonardo da Vinci"]),
]


@pytest.mark.slow
def test_a_thinking_template_judge_is_unavailable_not_wrong(thinking_policy):
    # a slow, shared CPU must not turn the verdicts into timeouts (also judge_unavailable, but raw None)
    judge = factory.make_judge(
        JudgeConfig(kind="model", timeout_s=600), policy=None, models={"frozen": thinking_policy}
    )
    verdicts = asyncio.run(judge.judge_many(ITEMS))
    # 16 tokens spent inside the template's <think>: no verdict, the exact-match miss stands, counted
    assert [v.method for v in verdicts] == ["judge_unavailable"] * 2, [v.raw for v in verdicts]
    assert all(v.raw.startswith("<think>") and v.score == 0.0 for v in verdicts)
    assert judge.unavailable_count == 2

    judge = factory.make_judge(
        JudgeConfig(kind="model", chat_template_kwargs={"enable_thinking": False}, timeout_s=600),
        policy=None,
        models={"frozen": thinking_policy},
    )
    verdicts = asyncio.run(judge.judge_many(ITEMS))
    assert [v.method for v in verdicts] == ["llm"] * 2, [v.raw for v in verdicts]
    assert judge.unavailable_count == 0
    # and the prompt really differs only by the template's switch
    msgs = [{"role": "user", "content": "hi"}]
    plain = judge.model.encode_messages(msgs)
    assert thinking_policy.encode_messages(msgs)[: len(plain)] == plain
    assert (
        thinking_policy.tokenizer.decode(thinking_policy.encode_messages(msgs)[len(plain) :]) == "<think>\n"
    )
