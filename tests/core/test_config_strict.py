"""Strict values in every settings model (tools.config_model.ConfigModel) and bounded reading of every YAML
file a user names (sesa_graph.config_yaml): a value is used as written or refused, never converted, and no
file makes the parser run out of time or memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from graphs.studio_config import StudioConfig, coerce
from sesa_eval.settings import EvalSettings
from sesa_graph.config import JudgeConfig, SolverConfig, load_config
from sesa_graph.config_yaml import ConfigError, parse_yaml, read_yaml_file
from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.skill import SkillFileError, load_skill_file
from sesa_graph.model_config import EndpointConfig, PolicyConfig
from tools.config import SearchConfig
from tools.config_model import ConfigModel, error_text, updated
from tools.errors import UserError

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b]\n"


@pytest.mark.parametrize(
    "model, field, value",
    [
        (SolverConfig, "max_turns", "4"),
        (SolverConfig, "temperature", "1.0"),
        (SolverConfig, "temperature", float("inf")),
        (SolverConfig, "top_p", float("nan")),
        (SolverConfig, "force_final_answer", "yes"),
        (SolverConfig, "force_final_answer", 1),
        (SolverConfig, "max_turns", True),
        (SearchConfig, "k", "3"),
        (SearchConfig, "timeout_s", float("-inf")),
        (MemoryConfig, "top_k", "3"),
        (MemoryConfig, "use_seeds", "no"),
        (MemoryConfig, "similarity_floor", float("nan")),
        (PolicyConfig, "max_batch_size", "16"),
        (PolicyConfig, "batch_wait_ms", float("inf")),
        (JudgeConfig, "timeout_s", "30"),
        (StudioConfig, "max_turns", "4"),
        (StudioConfig, "greedy", "false"),
        (StudioConfig, "seed", -1),
    ],
)
def test_every_settings_model_refuses_converted_values(model, field, value):
    with pytest.raises(ValidationError) as info:
        model.model_validate({field: value})
    assert [e["loc"][0] for e in info.value.errors()] == [field]


def test_eval_settings_are_strict_and_keep_paths_as_strings(tmp_path):
    ok = EvalSettings(name="e1", out_root=str(tmp_path), data_dir=str(tmp_path))
    assert ok.out_root == tmp_path and isinstance(ok.data_dir, Path)
    for bad in ({"limit": "5"}, {"concurrency": 2.5}, {"seeds": True}, {"top_k": float("nan")}):
        with pytest.raises(ValidationError):
            EvalSettings(name="e1", **bad)
    with pytest.raises(ValidationError, match="at most 100 characters"):
        EvalSettings(name="e" * 101)


def test_paths_literals_and_exact_numbers_still_read_from_yaml():
    mem = MemoryConfig.model_validate({"seeds_file": "s.yaml", "priming_files": ["a.yaml"], "mode": "off"})
    assert mem.seeds_file == Path("s.yaml") and mem.priming_files == [Path("a.yaml")] and mem.mode == "off"
    assert SolverConfig.model_validate({"max_turns": 4.0, "temperature": 1}).max_turns == 4
    with pytest.raises(ValidationError):
        SolverConfig.model_validate({"max_turns": 4.5})


def test_integers_past_64_bits_are_refused_wherever_they_sit():
    with pytest.raises(ConfigError, match=r"extra: integer out of range \(deep\.list\.1: 20-digit"):
        load_config(overrides={"extra.deep": {"list": [1, 2**64]}})
    with pytest.raises(ConfigError, match=r"train\.trainer_ranks.*out of range"):
        load_config(overrides={"train.trainer_ranks.solver": -(2**70)})
    assert load_config(overrides={"extra.n": 2**63 - 1}).extra["n"] == 2**63 - 1


def test_endpoint_urls_must_be_http():
    for bad in ("ftp://x/v1", "127.0.0.1:8000", "http://", "file:///etc/passwd"):
        with pytest.raises(ValidationError, match="not an http"):
            PolicyConfig(backend="openai", base_url=bad)
        with pytest.raises(ValidationError, match="not an http"):
            EndpointConfig(base_url=bad, model="m")
    assert PolicyConfig(backend="openai", base_url=["http://a:1/v1", "https://b/v1"]).base_url


def test_updated_validates_and_names_the_flag():
    solver = load_config(None).solver
    assert updated(solver, {"max_turns": 5}).max_turns == 5
    assert updated(solver, {"max_turns": 5}).temperature == solver.temperature
    with pytest.raises(UserError, match=r"^--max-turns 0: .*greater than or equal to 1"):
        updated(solver, {"max_turns": 0})
    with pytest.raises(UserError, match=r"^--turns -1: "):
        updated(solver, {"max_turns": -1}, {"max_turns": "--turns"})
    # the fields the caller set stay set, the rest stay defaults (a later default change still applies)
    assert updated(JudgeConfig(), {"max_tokens": 8}).model_fields_set == {"max_tokens"}


def test_error_text_says_what_was_given():
    class M(ConfigModel):
        n: int = 0
        b: bool = False
        f: float = 0.0

    def text(**kw) -> str:
        with pytest.raises(ValidationError) as info:
            M.model_validate(kw)
        return error_text(info.value.errors()[0])

    assert "got the string '4'" in text(n="4") and "without quotes" in text(n="4")
    assert text(n=True) == "expected a number, got the boolean true"
    assert "got the number 1" in text(b=1) and "true or false" in text(b=1)
    assert ".inf and .nan are not allowed" in text(f=float("nan"))


def test_only_true_and_false_are_yaml_booleans():
    data, _ = parse_yaml("a: yes\nb: off\nc: true\nd: FALSE\ne: [on, n, No]\n", "x.yaml")
    assert data == {"a": "yes", "b": "off", "c": True, "d": False, "e": ["on", "n", "No"]}
    assert load_config(overrides={"memory.mode": parse_yaml("off", "--set")[0]}).memory.mode == "off"


@pytest.mark.parametrize(
    "text, message",
    [
        (BOMB, r"x\.yaml:1: YAML anchors and aliases \(&a\)"),
        ("a: *nothing\n", r"x\.yaml:1: YAML anchors and aliases \(\*nothing\)"),
        ("extra: " + "[" * 5000 + "]" * 5000, "nested deeper than 32"),
        ("extra: " + "{a: " * 40 + "1" + "}" * 40, "nested deeper than 32"),
    ],
)
def test_aliases_and_deep_nesting_are_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_yaml(text, "x.yaml")


def test_nesting_within_the_bound_loads():
    data, _ = parse_yaml("extra: " + "[" * 30 + "]" * 30, "x.yaml")
    depth, node = 0, data["extra"]
    while node:
        depth, node = depth + 1, node[0]
    assert depth == 29


def test_yaml_files_are_regular_bounded_and_utf8(tmp_path):
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_yaml_file(fifo, "config file")  # returns at once: a FIFO is never opened
    with pytest.raises(ConfigError, match="is a directory"):
        read_yaml_file(tmp_path, "config file")
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(2 * 2**20)
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config(big)
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbfsolver:\n  max_turns: 7\n")
    assert load_config(bom).solver.max_turns == 7


def test_skill_files_are_read_with_the_same_bounds(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("version: 1\nskills: []\n" + BOMB)
    with pytest.raises(SkillFileError, match="anchors and aliases"):
        load_skill_file(bomb)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(SkillFileError, match="not a regular file"):
        load_skill_file(fifo)


def test_studio_context_is_strict():
    assert coerce({"max_turns": 3, "greedy": False}).max_turns == 3
    with pytest.raises(ValidationError):
        coerce({"max_turns": "3"})
