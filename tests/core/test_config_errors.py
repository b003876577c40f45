"""Every bad run config is one ConfigError line naming the file and line, or the flag, that holds the bad
value; nothing is silently read differently (duplicate keys, booleans for numbers, run names as paths)."""

import pytest

from sesa_cli.common import parse_overrides
from sesa_graph.config import ConfigError, load_config, resolve_config
from tools.errors import UserError


def write(tmp_path, text, name="c.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ("solver:\n  max_turns: 4\n  top_p: [1\n", r"c\.yaml:4:1: not valid YAML: .*expected ',' or ']'"),
        (
            "solver:\n  max_turns: 4\n  max_turns: 5\n",
            r"c\.yaml:3: duplicate key 'max_turns' \(first set on line 2\)",
        ),
        ("train: {steps: 2, steps: 3}\n", r"c\.yaml:1: duplicate key 'steps'"),
        ("- a\n- b\n", r"c\.yaml: the top level must be a mapping .* got a list"),
        ("just text\n", r"c\.yaml: the top level must be a mapping .* got a str"),
        (
            "solver:\n  max_turns: true\n",
            r"c\.yaml:2: solver\.max_turns: expected a number, got the boolean true",
        ),
        ("train:\n  learning_rate: false\n", r"c\.yaml:2: train\.learning_rate: expected a number"),
        ("search:\n  k: true\n", r"c\.yaml:2: search\.k: expected a number, got the boolean true"),
        ("memory:\n  top_k: true\n", r"c\.yaml:2: memory\.top_k: expected a number, got the boolean true"),
        (
            "solver:\n  max_turns: 2.5\n",
            r"c\.yaml:2: solver\.max_turns: Input should be a valid integer, got the number 2\.5",
        ),
        ("solver:\n  max_turns: 4\n  bogus: 1\n", r"c\.yaml:3: solver\.bogus: unknown key"),
        ("solver:\n  group_size: 1\n", r"c\.yaml: solver\.group_size is 1: GRPO needs at least 2"),
        ("name: ../x\n", r"c\.yaml:1: name: run name '\.\./x' must be a plain directory name"),
        ("name: /tmp/abs\n", "must be a plain directory name"),
        ("name: ''\n", "must be a plain directory name"),
        ("name: '..'\n", "must be a plain directory name"),
        ("name: 'a\\\\b'\n", "must be a plain directory name"),
        ("name: 'a\\0b'\n", "must be a plain directory name"),
    ],
)
def test_a_bad_file_is_blamed_on_its_line(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(write(tmp_path, text))
    assert isinstance(info.value, UserError) and "\n" not in str(info.value)


def test_bad_utf8_and_a_directory_name_the_file(tmp_path):
    bad = tmp_path / "b.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"b\.yaml: not UTF-8 text \(byte 9\)"):
        load_config(bad)
    with pytest.raises(ConfigError, match="is a directory; give a file"):
        load_config(tmp_path)


def test_plain_run_names_and_exact_numbers_still_load(tmp_path):
    cfg = load_config(write(tmp_path, "name: my-run_2.b\nsolver:\n  max_turns: 3\n  temperature: 1\n"))
    assert (cfg.name, cfg.solver.max_turns, cfg.solver.temperature) == ("my-run_2.b", 3, 1.0)
    assert load_config(overrides={"solver.max_turns": 4.0}).solver.max_turns == 4  # no fraction: fine
    assert load_config(overrides={"solver.force_final_answer": True}).solver.force_final_answer


@pytest.mark.parametrize(
    "pairs, flags, message",
    [
        (
            ["solver.max_turns=x"],
            {},
            r"^--set solver\.max_turns=x: solver\.max_turns: Input should be a valid integer",
        ),
        (["solver.max_turns=true"], {}, r"^--set solver\.max_turns=true: .*got the boolean true"),
        (["name.sub=1"], {}, r"^--set name\.sub=1: name is a value \(tiny-cpu\), not a section"),
        (["solver.max_turns.x=1"], {}, r"^--set solver\.max_turns\.x=1: solver\.max_turns is a value \(3\)"),
        (["solver..x=1"], {}, r"^--set solver\.\.x=1: 'solver\.\.x' is not a dotted key"),
        (["=1"], {}, "is not a dotted key"),
        (["solver.bogus=1"], {}, r"^--set solver\.bogus=1: solver\.bogus: unknown key"),
        (["name=../x"], {}, r"^--set name=\.\./x: name: run name"),
        (
            ["train.steps=0"],
            {"train.steps": "--steps"},
            r"^--steps 0: train\.steps: .*greater than or equal to 1",
        ),
        (["memory.mode=sometimes"], {"memory.mode": "--bank"}, r"^--bank sometimes: memory\.mode"),
        (["solver.group_size=1"], {}, r"tiny-cpu\.yaml with --set solver\.group_size=1: .*GRPO"),
    ],
)
def test_a_bad_override_is_blamed_on_its_flag(pairs, flags, message):
    with pytest.raises(ConfigError, match=message) as info:
        resolve_config(None, parse_overrides(pairs), flags)
    assert "\n" not in str(info.value)


def test_file_and_flag_errors_together_each_name_their_source(tmp_path):
    path = write(tmp_path, "solver:\n  top_p: 7\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, parse_overrides(["train.steps=-1"]))
    msg = str(info.value)
    assert f"{path}:2: solver.top_p:" in msg and "--set train.steps=-1: train.steps:" in msg


@pytest.mark.parametrize(
    "pair, message",
    [
        ("solver.max_turns", r"--set solver\.max_turns: expected KEY=VALUE"),
        ("solver=[", r"--set solver=\[ \(column 2\): not valid YAML"),
        ("solver={a: 1, a: 2}", r"--set solver=\{a: 1, a: 2\}: duplicate key 'a'"),
    ],
)
def test_a_malformed_set_names_itself(pair, message):
    with pytest.raises(ConfigError, match=message):
        parse_overrides([pair])
