"""Every unusable corpus line is a CorpusError (a UserError) naming the file and line."""

import json

import pytest

from tools.corpus import CorpusError, CorpusNotFoundError, Doc, load_corpus, load_jsonl_corpus
from tools.errors import UserError

GOOD = json.dumps({"id": "a", "contents": '"A"\ntext a'}).encode()


def write(tmp_path, data: bytes):
    path = tmp_path / "c.jsonl"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"id": "x", "contents": "\xff\xfe"}', r"c\.jsonl:2: not valid UTF-8 .*at byte \d+ of the file"),
        (b"{oops", r"c\.jsonl:2: not valid JSON"),
        (b"[" * 100_000, r"c\.jsonl:2: (not valid|unusable) JSON"),  # nesting deeper than the parser allows
        (b'{"id": null, "contents": "\\"T\\"\\nx"}', r"c\.jsonl:2: 'id' is null"),
        (b'{"contents": "\\"T\\"\\nx"}', r"c\.jsonl:2: 'id' is missing"),
        (b'{"id": "  ", "contents": "\\"T\\"\\nx"}', r"c\.jsonl:2: 'id' is blank"),
        (b'{"id": {"a": 1}, "contents": "x"}', r"c\.jsonl:2: 'id' must be a string or an integer, got dict"),
        (b'{"id": true, "contents": "x"}', r"c\.jsonl:2: 'id' must be a string or an integer, got bool"),
        (b'{"id": "z", "contents": ""}', r"c\.jsonl:2: 'contents' is empty"),
        (b'{"id": "z", "contents": 5}', r"c\.jsonl:2: 'contents' must be a string .*got int"),
        (b'{"id": "z"}', r"c\.jsonl:2: 'contents' must be a string .*got missing"),
        (b'{"id": "\\ud800", "contents": "x"}', r"c\.jsonl:2: .*unpaired surrogate"),
        (b'["id", "contents"]', r"c\.jsonl:2: expected a JSON object"),
    ],
)
def test_bad_line_is_a_user_error_naming_file_and_line(tmp_path, line, message):
    path = write(tmp_path, GOOD + b"\n" + line + b"\n")
    with pytest.raises(CorpusError, match=message) as info:
        load_corpus(str(path))
    assert isinstance(info.value, UserError) and str(path) in str(info.value)


def test_duplicate_id_names_both_lines(tmp_path):
    other = json.dumps({"id": "b", "contents": '"B"\nb'}).encode()
    path = write(tmp_path, GOOD + b"\n" + other + b"\n" + GOOD.replace(b"text a", b"changed") + b"\n")
    with pytest.raises(CorpusError, match=rf"{path}:3: duplicate id 'a' \(first at {path}:1\)"):
        load_jsonl_corpus(path)


def test_integer_and_string_ids_collide(tmp_path):
    path = write(tmp_path, b'{"id": 1, "contents": "x"}\n{"id": "1", "contents": "y"}\n')
    with pytest.raises(CorpusError, match="duplicate id '1'"):
        load_jsonl_corpus(path)


def test_empty_file_and_directory_and_missing_path(tmp_path):
    with pytest.raises(CorpusError, match="no documents"):
        load_corpus(str(write(tmp_path, b"\n  \n")))
    with pytest.raises(CorpusNotFoundError, match="is a directory"):
        load_corpus(str(tmp_path))
    with pytest.raises(CorpusNotFoundError, match="does not exist") as info:
        load_corpus(str(tmp_path / "nope.jsonl"))
    assert isinstance(info.value, UserError) and isinstance(info.value, FileNotFoundError)


def test_byte_order_mark_and_crlf_are_accepted(tmp_path):
    path = write(tmp_path, b"\xef\xbb\xbf" + GOOD + b"\r\n" + b'{"id": 2, "contents": "\\"B\\""}\r\n')
    assert load_jsonl_corpus(path) == [Doc("a", "A", "text a"), Doc("2", "B", "")]
