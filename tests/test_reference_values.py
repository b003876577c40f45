"""The paper's and SSP's values: the GPU configs follow them except the named deviations, and
`sesa config show --origins` says which is which."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sesa_cli.main import build_app
from sesa_graph.config import load_config, resolve_config
from sesa_graph.reference_values import ARMS, DEVIATIONS, REFERENCES, flatten, origin, references

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["qwen3-4b-8xa100", "qwen3-4b-h200", "qwen3-8b-2x8h100"])
def test_gpu_configs_take_every_reference_value_but_the_named_deviations(name):
    values = flatten(load_config(ROOT / "configs" / f"{name}.yaml").model_dump(mode="json"))
    differ = {k: (values[k], ref.value) for k, ref in REFERENCES.items() if values[k] != ref.value}
    assert set(differ) == set(DEVIATIONS), differ
    for key in REFERENCES:  # and the file marks each of them where it sets it
        text = (ROOT / "configs" / f"{name}.yaml").read_text()
        leaf = key.rsplit(".", 1)[1]
        lines = [ln for ln in text.splitlines() if ln.strip().startswith(f"{leaf}:")]
        if lines:
            assert any("[paper]" in ln or "[SSP]" in ln for ln in lines), (key, lines)


def test_every_reference_key_is_a_config_field():
    values = flatten(load_config(None).model_dump(mode="json"))
    # a key inside a dict field (e.g. solver_policy.chat_template_kwargs.enable_thinking) names that field
    assert {k if k in values else k.rsplit(".", 1)[0] for k in REFERENCES} <= set(values)


def test_origin_marks_equal_and_deviating_values():
    assert origin("solver.group_size", 5) == "[paper]"
    assert origin("train.beta", 0.0).startswith("[SSP 0.01; deviation")
    assert "frontier shaping" in origin("rewards.format_penalty", -1.0)
    assert origin("solver.temperature", 0.7) == ""


def test_config_show_origins_lists_sources_and_deviations():
    res = CliRunner().invoke(
        build_app(), ["config", "show", "--origins", "-c", str(ROOT / "configs" / "qwen3-4b-h200.yaml")]
    )
    assert res.exit_code == 0, res.output
    assert "train.beta = 0.01  # file " in res.output and "qwen3-4b-h200.yaml [SSP]" in res.output
    assert "memory.tombstone_ttl_steps = 200  # default" in res.output
    assert "train.updates_per_step = 2  # file " in res.output  # SSP's 2 minibatch updates: a setting now
    assert "2 minibatch updates" not in res.output


@pytest.mark.parametrize("name", ["qwen3-4b-8xa100", "qwen3-4b-h200", "qwen3-8b-2x8h100"])
def test_the_ssp_arm_differs_from_ssp_only_by_the_named_deviations(name):
    arm = ARMS["ssp"]
    cfg, _ = resolve_config(ROOT / "configs" / f"{name}.yaml", dict(arm.settings))
    values = flatten(cfg.model_dump(mode="json"))
    differ = {k for k, ref in references("ssp").items() if values[k] != ref.value}
    # SSP's own reward and penalty hold under the arm; the GPU-budget and turn-cap deviations remain
    assert differ == set(DEVIATIONS) - {"rewards.format_penalty"}, differ
    assert values["memory.mode"] == "off" and values["rewards.format_penalty"] == 0.0


def test_config_show_arm_marks_against_ssp_and_names_the_flag():
    args = [
        "config",
        "show",
        "--origins",
        "--arm",
        "ssp",
        "-c",
        str(ROOT / "configs" / "qwen3-4b-8xa100.yaml"),
    ]
    res = CliRunner().invoke(build_app(), args)
    assert res.exit_code == 0, res.output
    assert 'rewards.proposer = "one_minus_p"  # flag --arm ssp [SSP]' in res.output
    assert 'memory.mode = "off"  # flag --arm ssp [SSP]' in res.output
    assert "rewards.format_penalty = 0.0  # default [SSP]" in res.output
    plain = CliRunner().invoke(build_app(), args[:3] + args[5:])  # without the arm: SESA's references
    assert any(
        ln.startswith('memory.mode = "on"  # file') and ln.endswith("[paper]")
        for ln in plain.output.splitlines()
    )


def test_config_show_refuses_an_unknown_arm():
    res = CliRunner().invoke(build_app(), ["config", "show", "--arm", "grpo"])
    assert res.exit_code == 2 and "--arm 'grpo'" in res.stderr and "ssp" in res.stderr
