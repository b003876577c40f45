"""How `sesa` reports failures: a user error is one line `error: ...` on stderr and exit code 2 (a service
error exit 1), a traceback only with -v/--verbose or SESA_DEBUG=1; anything unexpected keeps its traceback."""

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sesa_cli import main as cli_main
from sesa_cli.main import build_app

SESA = Path(sys.executable).parent / "sesa"
runner = CliRunner()


@pytest.fixture
def dup(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("solver:\n  max_turns: 4\n  max_turns: 5\n")
    return path


def sesa(*args, **env):
    return subprocess.run(
        [str(SESA), *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**_env(), **env},
    )


def _env():
    import os

    return {k: v for k, v in os.environ.items() if k != "SESA_DEBUG"}


def test_the_console_script_prints_one_line_and_exits_2(dup):
    res = sesa("config", "show", "-c", dup)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [
        f"error: {dup}:3: duplicate key 'max_turns' (first set on line 2); keep one of them"
    ]


def test_verbose_adds_the_traceback(dup):
    res = sesa("-v", "config", "show", "-c", dup)
    assert res.returncode == 2 and "Traceback" in res.stderr and "ConfigError" in res.stderr
    assert res.stderr.splitlines()[-1].startswith(f"error: {dup}:3: duplicate key")


def run_main(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["sesa", *map(str, args)])
    with pytest.raises(SystemExit) as info:
        cli_main.main()
    return info.value.code, capsys.readouterr()


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["train", "--set", "solver.max_turns=x"],
            "error: --set solver.max_turns=x: solver.max_turns: Input",
        ),
        (
            ["train", "--set", "name.sub=1"],
            "error: --set name.sub=1: name is a value (tiny-cpu), not a section",
        ),
        (
            ["train", "--steps", "0"],
            "error: --steps 0: train.steps: Input should be greater than or equal to 1",
        ),
        (["train", "--name", "../x"], "error: --name ../x: name: run name '../x' must be a plain directory"),
        (["train", "--set", "solver.max_turns"], "error: --set solver.max_turns: expected KEY=VALUE"),
        (["trace", "/nonexistent/run"], "error: "),
        (["eval", "compare", "/nonexistent/a", "/nonexistent/b"], "error: "),
    ],
)
def test_main_reports_user_errors_in_one_line(monkeypatch, capsys, args, message):
    monkeypatch.delenv("SESA_DEBUG", raising=False)
    code, out = run_main(monkeypatch, capsys, *args)
    lines = out.err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(message), out.err
    assert "Traceback" not in out.err + out.out


def test_verbose_after_the_command_or_sesa_debug_add_the_traceback(monkeypatch, capsys, dup):
    monkeypatch.delenv("SESA_DEBUG", raising=False)
    code, out = run_main(monkeypatch, capsys, "train", "--set", "solver.max_turns=x", "-v")  # train's own -v
    assert code == 2 and "Traceback" in out.err and out.err.splitlines()[-1].startswith("error: --set")
    monkeypatch.setenv("SESA_DEBUG", "1")
    code, out = run_main(monkeypatch, capsys, "config", "show", "-c", dup)
    assert code == 2 and "Traceback" in out.err


def test_a_config_error_is_one_line_through_the_test_runner_too(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("solver:\n  max_turns: true\n")
    res = runner.invoke(build_app(), ["config", "show", "-c", str(bad)])
    assert res.exit_code == 2
    assert res.output == f"error: {bad}:2: solver.max_turns: expected a number, got the boolean true\n"


def test_a_service_error_exits_1(monkeypatch, capsys):
    monkeypatch.delenv("SESA_DEBUG", raising=False)
    args = ["search", "q", "--backend", "http", "--url", "http://127.0.0.1:9", "--retries", "0"]
    code, out = run_main(monkeypatch, capsys, *args)
    assert (
        code == 1
        and out.err.startswith("error: retrieval server http://127.0.0.1:9")
        and "Traceback" not in out.err
    )


def test_usage_errors_stay_clicks(monkeypatch, capsys):
    code, out = run_main(monkeypatch, capsys, "config", "show", "--bogus")
    assert code == 2 and "No such option" in out.err


def test_an_unexpected_exception_keeps_its_traceback(monkeypatch):
    import sesa_graph.config

    def boom(*a, **k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(sesa_graph.config, "resolve_config", boom)
    monkeypatch.setattr(sys, "argv", ["sesa", "config", "show"])
    with pytest.raises(RuntimeError, match="a bug"):  # not swallowed: typer's hook prints its traceback
        cli_main.main()
