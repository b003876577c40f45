"""The eval's judge: exact match by default, a fixed model of the run config's `models:` (kind 'model'),
and the policy grading itself only when asked, with a warning."""

import json

import pytest
from eval_fakes import ListSearch, ScriptedSolver, hedging_misses
from pydantic import ValidationError
from typer.testing import CliRunner

from sesa_cli.eval import resolve_settings
from sesa_eval.harness import EvalSettings, evaluate
from sesa_graph.config import JudgeConfig
from sesa_graph.model_config import EndpointConfig, PolicyConfig
from sesa_graph.policy.base import GenerationResult

runner = CliRunner()

RUN_CONFIG = """
models:
  judge8b:
    base_url: http://127.0.0.1:9/v1
    model: Qwen/Qwen3-8B
judge:
  kind: model
  endpoint: judge8b
  chat_template_kwargs: {enable_thinking: false}
  require_overlap: false  # Milan for Rome shares no stem: this file's miss must reach the model
distiller: {endpoint: judge8b}
proposer: {rag_reader: {endpoint: judge8b}}
"""


def test_the_default_judge_is_the_default_runs_with_its_fallback_said(monkeypatch):
    """No --config: the judge of the default run (exact match, then Qwen on a miss); where Qwen is not
    fetched (this test's empty SESA_HOME), exact match alone, and the settings table says why."""
    assert EvalSettings(name="x").judge.kind == "none"
    s, rows = resolve_settings(None, {})
    src = {k: f for k, _, f in rows}
    assert s.judge.kind == "none" and s.models == {}
    assert src["judge.kind"].startswith("fallback: judge: models.qwen is not fetched")
    monkeypatch.setattr("sesa_graph.fixed_models.missing_fetched_model", lambda model: None)
    monkeypatch.setattr("sesa_graph.fixed_models.is_fetched", lambda spec: True)  # the GGUF llama.cpp reads
    monkeypatch.setattr("sesa_graph.policy.llama_server.llama_cpp_missing", lambda: None)
    s, rows = resolve_settings(None, {})
    src = {k: f for k, _, f in rows}
    assert (s.judge.kind, s.judge.endpoint) == ("model", "qwen") and "qwen" in s.models
    assert src["judge.kind"] == "config configs/tiny-cpu.yaml (the default run)"
    assert s.identity()["judge_model"]["model"] == s.models["qwen"].serve.model
    s, _ = resolve_settings(None, {"judge.kind": "none"})  # --judge none: exact match, nothing started
    assert s.judge.kind == "none" and s.models == {}


def test_a_run_configs_models_carry_into_the_eval(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(RUN_CONFIG)
    s, _ = resolve_settings(cfg, {})
    assert s.judge.kind == "model" and s.judge.endpoint == "judge8b"
    assert s.models["judge8b"].model == "Qwen/Qwen3-8B" and "frozen" not in s.models
    assert s.identity()["judge_model"]["model"] == "Qwen/Qwen3-8B"  # another judge model: no cache reuse
    cfg.write_text("judge:\n  kind: none\n")
    s, _ = resolve_settings(cfg, {"judge.kind": "frozen"})  # --judge NAME: a model of the config's models
    assert (s.judge.kind, s.judge.endpoint) == ("model", "frozen")
    assert s.judge.timeout_s == 600.0  # the default frozen model is in-process, sharing the CPU
    assert "judge_model" not in resolve_settings(cfg, {})[0].identity()  # other judges' identity unchanged


def test_kind_model_without_models_names_the_fix():
    with pytest.raises(ValidationError, match="--judge URL --judge-model M"):
        EvalSettings(name="x", judge=JudgeConfig(kind="model"))


@pytest.fixture
def data(tmp_path):
    from eval_fakes import write_jsonl

    d = tmp_path / "data"
    d.mkdir()
    write_jsonl(
        d / "alpha.jsonl",
        [
            {"id": "a1", "question": "Capital of France? answer: Paris", "golden_answers": ["Paris"]},
            {"id": "a2", "question": "Capital of Italy? answer: Milan", "golden_answers": ["Rome"]},
        ],
    )
    return d


class JudgeModel:
    """A fixed judge model that says ``reply``; records its requests and whether it was stopped."""

    name, tokenizer = "judge8b", None

    def __init__(self, reply):
        self.reply, self.requests, self.closed = reply, [], False

    async def generate(self, requests):
        self.requests += requests
        return [GenerationResult(self.reply, [], [], [], "eos") for _ in requests]

    def encode_messages(self, m):
        return [0]

    def encode_text(self, t):
        return [0]

    def close(self):
        self.closed = True


@pytest.mark.parametrize(
    ("reply", "method", "score"), [("Correct", "llm", 1.0), ("<think>hmm", "judge_unavailable", 0.0)]
)
async def test_kind_model_starts_the_judge_model_and_stops_it(
    monkeypatch, tmp_path, data, reply, method, score
):
    judge_model = JudgeModel(reply)
    started = []

    def fake_fixed(models, names, owner=None, log_dir=None):
        started.append((dict(models), list(names)))
        return {"judge8b": judge_model}

    monkeypatch.setattr("sesa_eval.harness.make_fixed_models", fake_fixed)
    s = EvalSettings(
        name="t",
        out_root=tmp_path / "evals",
        data_dir=data,
        judge=JudgeConfig(kind="model", endpoint="judge8b", require_overlap=False),  # Milan for Rome: asked
        models={"judge8b": EndpointConfig(serve=PolicyConfig(model="m"))},
    )
    out = await evaluate(s, policy=ScriptedSolver(hedging_misses("Paris")), search=ListSearch())
    assert started and started[0][1] == ["judge8b"] and judge_model.closed
    recs = {r["id"]: r for r in map(json.loads, (out.out_dir / "records.jsonl").read_text().splitlines())}
    assert recs["a1"]["judge_method"] == "exact"
    assert (recs["a2"]["judge_method"], recs["a2"]["score"]) == (method, score)
    assert len(judge_model.requests) == 1  # only the miss
    assert out.report["judge"] == "judge8b (m)"


async def test_a_judge_fallback_is_stated_in_the_report(tmp_path, data):
    note = "judge: models.qwen is not fetched on this machine -- the judge is exact match alone instead"
    s = EvalSettings(name="t", out_root=tmp_path / "evals", data_dir=data, judge_fallback=note)
    out = await evaluate(s, policy=ScriptedSolver(), search=ListSearch())
    assert out.report["judge_fallback"] == note
    assert note in (out.out_dir / "report.md").read_text()


def test_judge_policy_is_warned(tmp_path, data, monkeypatch):
    import typer

    from sesa_cli.eval import eval_app

    monkeypatch.setattr(
        "sesa_eval.harness.make_policy", lambda cfg, tokenizer=None, log_path=None: ScriptedSolver()
    )
    monkeypatch.setattr("tools.backends.make_backend", lambda cfg: ListSearch())
    parent = typer.Typer()
    parent.add_typer(eval_app, name="eval")
    parent.command()(lambda: None)
    args = [
        "eval",
        "--data-dir",
        str(data),
        "--out-root",
        str(tmp_path),
        "--no-progress",
        "--judge",
        "policy",
    ]
    res = runner.invoke(parent, args)
    assert res.exit_code == 0, res.output
    assert "the evaluated model grades its own answers" in " ".join(res.output.split())
    res = runner.invoke(parent, [*args[:-1], "none"])
    assert "grades its own" not in res.output
