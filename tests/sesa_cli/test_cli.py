"""The assembled `sesa` CLI and the run config: help for every command, config errors name the key."""

import pytest
from typer.testing import CliRunner

from sesa_cli.main import build_app
from sesa_graph.config import ConfigError, load_config

runner = CliRunner()
COMMANDS = [
    "train",
    "rollout",
    "propose",
    "warmup",
    "search",
    "bank",
    "eval",
    "trace",
    "report",
    "policy",
    "config",
]


def test_every_command_has_help():
    app = build_app()
    out = runner.invoke(app, ["--help"])
    assert out.exit_code == 0
    for cmd in COMMANDS:
        assert cmd in out.output
        sub = runner.invoke(app, [cmd, "--help"])
        assert sub.exit_code == 0, (cmd, sub.output)


def test_config_show_prints_the_resolved_default():
    out = runner.invoke(build_app(), ["config", "show"])
    assert out.exit_code == 0 and "group_size: 5" in out.output and "embedded-warm" in out.output


def test_config_show_previews_set_overrides_and_blames_the_flag():
    out = runner.invoke(build_app(), ["config", "show", "--set", "solver.group_size=3"])
    assert out.exit_code == 0 and "group_size: 3" in out.output and "--set solver.group_size=3" in out.output
    bad = runner.invoke(build_app(), ["config", "show", "--set", "solver.group_size=x"])
    assert bad.exit_code == 2 and "--set solver.group_size=x" in bad.output


def test_default_config_is_the_embedded_cpu_run():
    cfg = load_config()
    assert cfg.solver_policy.model == "embedded-warm" and cfg.search.backend == "bm25"
    assert cfg.memory.consolidate_every < cfg.train.steps  # a consolidation happens within the default run


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"solver.bogus": 1}, "solver.bogus: unknown key"),
        ({"solver.group_size": 1}, "GRPO needs at least 2"),
        ({"solver_policy.backend": "openai"}, "needs base_url"),
        ({"judge.kind": "openai"}, "needs base_url and model"),
        ({"memory.mode": "sometimes"}, "memory.mode"),
    ],
)
def test_bad_configs_name_the_problem(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=overrides)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_resolved_settings_name_the_flag_the_file_or_the_default(tmp_path):
    from sesa_graph.config import resolve_config

    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("solver:\n  max_turns: 4\n")
    cfg, rows = resolve_config(cfg_file, {"train.steps": 3, "solver.top_p": 0.9}, {"train.steps": "--steps"})
    src = {k: s for k, _, s in rows}
    assert cfg.train.steps == 3 and src["train.steps"] == "flag --steps"
    assert src["solver.top_p"] == "flag --set solver.top_p"
    assert src["solver.max_turns"] == f"file {cfg_file}"
    assert src["solver.group_size"] == "default"
    with pytest.raises(ConfigError, match=r"train.steps: .*\(set on the command line\)"):
        resolve_config(cfg_file, {"train.steps": 0})
