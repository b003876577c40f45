"""Fuzzing the parsers a user feeds a run config through: any YAML text as the file, any `--set KEY=VALUE`
string. Each either loads or is a ConfigError (a UserError) naming the file or the flag -- never another
exception."""

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sesa_cli.common import parse_overrides
from sesa_graph.config import ConfigError, RunConfig, load_config

SECTIONS = [
    "solver",
    "train",
    "search",
    "memory",
    "judge",
    "name",
    "seed",
    "models",
    "solver_policy",
    "extra",
]
FIELDS = ["max_turns", "top_p", "group_size", "steps", "k", "top_k", "mode", "backend", "base_url", "x", ""]
SCALARS = st.sampled_from(
    [
        "1",
        "-1",
        "0",
        "2.5",
        "true",
        "null",
        "~",
        "'x'",
        "[]",
        "{}",
        "[1, 2]",
        "{a: 1}",
        "1e9",
        ".inf",
        "x/../y",
    ]
)
YAML_BITS = st.sampled_from(
    [
        ":",
        " ",
        "\n",
        "  ",
        "- ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "'",
        '"',
        "&a ",
        "*a",
        "!!str ",
        "!!python/name:x",
        "#",
        "\t",
    ]
)


def key():
    return st.builds(lambda s, f: f"{s}.{f}" if f else s, st.sampled_from(SECTIONS), st.sampled_from(FIELDS))


yaml_text = st.one_of(
    st.text(alphabet=string.printable, max_size=80),
    st.lists(
        st.one_of(
            st.builds(lambda k, v: k.replace(".", ":\n  ") + f": {v}\n", key(), SCALARS),
            YAML_BITS,
            SCALARS,
        ),
        max_size=8,
    ).map("".join),
)

set_pair = st.one_of(
    st.text(max_size=30),
    st.builds(lambda k, v: f"{k}={v}", key(), SCALARS),
    st.builds(lambda k, b, v: f"{k}{b}={v}", key(), YAML_BITS, st.text(max_size=10)),
)


def check(exc, *where):
    msg = str(exc)
    assert any(w in msg for w in where), msg
    assert msg.strip() and "\n" not in msg


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=yaml_text)
def test_any_yaml_text_loads_or_names_the_file(tmp_path, text):
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        assert isinstance(load_config(path), RunConfig)
    except ConfigError as exc:
        check(exc, str(path))


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(set_pair, min_size=1, max_size=3))
def test_any_set_flag_loads_or_names_the_flag(pairs):
    try:
        assert isinstance(load_config(None, parse_overrides(pairs)), RunConfig)
    except ConfigError as exc:
        check(exc, "--set", "tiny-cpu.yaml")
