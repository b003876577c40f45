"""`sesa eval` as the lead registers it (a sub-app of the main typer app), with a scripted policy."""

import json

import pytest
import typer
from eval_fakes import ListSearch, ScriptedSolver
from typer.testing import CliRunner

from sesa_cli.eval import eval_app, resolve_settings

runner = CliRunner()


@pytest.fixture
def app():
    parent = typer.Typer()
    parent.add_typer(eval_app, name="eval")

    @parent.command()
    def other() -> None:  # a second command, so `eval` is a real subcommand
        pass

    return parent


@pytest.fixture
def scripted(monkeypatch):
    """The CLI builds the scripted policy and search instead of loading a model."""
    policy = ScriptedSolver()
    monkeypatch.setattr("sesa_eval.harness.make_policy", lambda cfg, tokenizer=None, log_path=None: policy)
    monkeypatch.setattr("tools.backends.make_backend", lambda cfg: ListSearch())
    return policy


def test_help(app):
    res = runner.invoke(app, ["eval", "--help"])
    assert res.exit_code == 0
    for opt in (
        "--data-dir",
        "--bank-modes",
        "--judge",
        "--seeds",
        "--base-url",
        "--search-backend",
        "compare",
    ):
        assert opt in res.output
    res = runner.invoke(app, ["eval", "compare", "--help"])
    assert res.exit_code == 0 and "--tolerance" in res.output and "DIR:MODE" in res.output


def test_run_then_compare(app, scripted, tmp_path, data_dir):
    common = [
        "eval",
        "--data-dir",
        str(data_dir),
        "--out-root",
        str(tmp_path / "evals"),
        "--judge",
        "none",
        "--no-progress",
    ]
    res = runner.invoke(app, [*common, "--name", "a"])
    assert res.exit_code == 0, res.output
    assert "41.7 (7)" in res.output and "questions/minute" in res.output
    assert "policy.model" in res.output and "judge.kind" in res.output  # settings printed with sources
    report = json.loads((tmp_path / "evals/a/report.json").read_text())
    assert report["judge"] == "none" and report["complete"]
    scripted.answer = lambda q, user: "Paris"  # B: worse on bamboogle, better on nothing
    res = runner.invoke(app, [*common, "--name", "b"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["eval", "compare", str(tmp_path / "evals/a"), str(tmp_path / "evals/b")])
    assert res.exit_code == 0, res.output
    assert "▼ regression" in res.output and "B is below A on: Bamboogle, alpha" in res.output
    res = runner.invoke(
        app,
        [
            "eval",
            "compare",
            str(tmp_path / "evals/a"),
            str(tmp_path / "evals/b"),
            "--fail-on-regression",
            "--metric",
            "all",
        ],
    )
    assert res.exit_code == 1 and "Token F1" in res.output


def test_unknown_dataset_exits_2(app, scripted, tmp_path, data_dir):
    res = runner.invoke(
        app,
        [
            "eval",
            "--data-dir",
            str(data_dir),
            "--datasets",
            "alpha,nq",
            "--out-root",
            str(tmp_path),
            "--no-progress",
        ],
    )
    assert res.exit_code == 2
    assert "unknown dataset 'nq'" in res.output and "Known datasets: bamboogle, alpha" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bank-modes", "off,on"], "need a skill bank"),
        (["--judge", "http://127.0.0.1:9/v1"], "needs base_url and model"),  # no --judge-model
        (["--judge", "gpt"], "use none, policy or an http"),
        (["--limit", "0"], "greater than or equal to 1"),
    ],
)
def test_bad_settings_exit_2(app, tmp_path, args, message):
    res = runner.invoke(app, ["eval", "--out-root", str(tmp_path), *args])
    assert res.exit_code == 2 and message in " ".join(res.output.split())


def test_settings_sources(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("solver:\n  max_turns: 4\njudge:\n  kind: none\nsolver_policy:\n  model: embedded-warm\n")
    s, rows = resolve_settings(cfg, {"solver.max_turns": 2, "policy.base_url": None, "judge.kind": None})
    src = {k: (v, f) for k, v, f in rows}
    assert s.solver.max_turns == 2 and src["solver.max_turns"] == ("2", "flag")
    assert s.judge.kind == "none" and src["judge.kind"][1] == f"config {cfg}"
    assert s.name == "embedded-warm" and src["name"] == ("'embedded-warm'", "from --model")
    assert src["policy.model"][1] == f"config {cfg}" and src["solver.max_tokens_per_turn"][1] == "default"
    cfg.write_text("judge:\n  kind: policy\n")  # a vLLM-served judge keeps the default timeout
    s, _ = resolve_settings(cfg, {})
    assert s.policy.backend == "vllm" and s.judge.timeout_s == 30.0
    cfg.write_text("solver_policy:\n  backend: local\njudge:\n  kind: policy\n")  # a local one waits longer
    s, _ = resolve_settings(cfg, {})
    assert s.judge.timeout_s == 600.0
    cfg.write_text("judge:\n  kind: policy\n  timeout_s: 45\n")
    s, _ = resolve_settings(cfg, {})
    assert s.judge.timeout_s == 45.0
    s, rows = resolve_settings(None, {"judge.kind": "policy", "policy.backend": "local"})  # --engine local
    src = {k: (v, f) for k, v, f in rows}
    assert s.judge.timeout_s == 600.0 and src["judge.timeout_s"][1] == "eval default for a local policy judge"
    s, _ = resolve_settings(None, {"policy.base_url": "http://h:8000/v1", "policy.model": "Qwen/Qwen3-4B"})
    assert s.policy.backend == "openai" and s.name == "Qwen-Qwen3-4B"


def test_dead_endpoint_at_start(app, tmp_path, data_dir):
    res = runner.invoke(
        app,
        [
            "eval",
            "--data-dir",
            str(data_dir),
            "--out-root",
            str(tmp_path),
            "--no-progress",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "embedded",
            "--judge",
            "none",
            "--retries",
            "0",
        ],
    )
    assert res.exit_code == 1
    assert "does not answer" in " ".join(res.output.split())


def test_solver_budgets_default_to_the_models_run_or_the_default_run(tmp_path):
    from sesa_graph.config import load_config

    s, rows = resolve_settings(None, {})
    default = load_config(None).solver
    assert (s.solver.max_turns, s.solver.max_total_tokens, s.solver.doc_chars) == (
        default.max_turns,
        default.max_total_tokens,
        default.doc_chars,
    )
    assert {k: src for k, _, src in rows}["solver.max_turns"].endswith("(the default run)")
    run = tmp_path / "runs" / "r"
    (run / "policies" / "solver").mkdir(parents=True)
    (run / "config.yaml").write_text("solver:\n  max_turns: 7\n  doc_chars: 300\n")
    s, rows = resolve_settings(None, {"policy.model": str(run / "policies" / "solver")})
    assert (s.solver.max_turns, s.solver.doc_chars) == (7, 300)
    assert "(the model's run)" in {k: src for k, _, src in rows}["solver.doc_chars"]
