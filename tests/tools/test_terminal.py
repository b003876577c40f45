"""tools.terminal: outside text made safe for a terminal, and JSON lines that stay the same data."""

import json

import pytest

from tools.terminal import ID_CHARS, data_line, shown, unsafe

ESC_TITLE = "\x1b]0;pwned\x07"


@pytest.mark.parametrize(
    "raw, seen",
    [
        (ESC_TITLE, "\\x1b]0;pwned\\x07"),
        ("\x1b[2J", "\\x1b[2J"),
        ("\x9b31m", "\\x9b31m"),
        ("a\u202eb", "a\\u202eb"),
        ("nul\x00", "nul\\x00"),
        ("del\x7f", "del\\x7f"),
        ("tab\tand\nline", "tab\tand\nline"),
        ("Zürich – 東京", "Zürich – 東京"),
    ],
)
def test_shown_escapes_controls_and_keeps_text(raw, seen):
    assert shown(raw) == seen


def test_one_line_escapes_breaks_too():
    assert shown("a\tb\nc\r", one_line=True) == "a\\x09b\\x0ac\\x0d"


def test_long_fields_are_cut_with_a_note():
    out = shown("x" * 1_000_000, ID_CHARS)
    assert out.startswith("x" * ID_CHARS) and out.endswith("... [999800 more characters]")
    assert shown("x" * 10, None) == "x" * 10


def test_data_line_is_the_same_json_without_raw_controls():
    row = {"d": f"Zürich {ESC_TITLE} \x9b \u202e"}
    line = data_line(row)
    assert not unsafe(line) and json.loads(line) == row
    plain = {"d": "Zürich"}
    assert data_line(plain) == '{"d": "Zürich"}'  # readable when nothing needs escaping
