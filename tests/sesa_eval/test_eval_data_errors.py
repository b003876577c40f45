"""Eval data: every unusable row or file is a DatasetError naming the file, line and field; fuzzed input
either loads or raises one."""

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sesa_eval.datasets import DatasetError, read_jsonl_questions, read_target_pool
from tools.errors import UserError

GOOD = json.dumps({"id": "1", "question": "Who?", "golden_answers": ["Ann"]}).encode()


def row(**kw) -> bytes:
    return json.dumps({"id": "2", "question": "Where?", "golden_answers": ["Rome"], **kw}).encode()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"id": "2", "question": "\xff?", "golden_answers": ["a"]}',
            r"d\.jsonl:2: not valid UTF-8 .*byte \d+",
        ),
        (b"{bad", r"d\.jsonl:2: not valid JSON"),
        (b"[" * 100_000, r"d\.jsonl:2: (not valid|unusable) JSON"),
        (b"1" * 5000, r"d\.jsonl:2: unusable JSON"),  # an integer longer than Python converts
        (
            json.dumps({"id": "2", "golden_answers": ["a"]}).encode(),
            r"d\.jsonl:2: row has no non-empty 'question'",
        ),
        (row(question=["Where?"]), r"d\.jsonl:2: row has no non-empty 'question'"),
        (json.dumps({"id": "2", "question": "q"}).encode(), r"d\.jsonl:2: row has no 'golden_answers'"),
        (row(golden_answers=[None, "Rome"]), r"d\.jsonl:2: 'golden_answers'\[0\] is null"),
        (row(golden_answers=[True]), r"d\.jsonl:2: 'golden_answers'\[0\] is true"),
        (
            b'{"id": "2", "question": "q", "golden_answers": [NaN]}',
            r"d\.jsonl:2: 'golden_answers'\[0\] is NaN",
        ),
        (row(id={"a": 1}), r"d\.jsonl:2: row has no 'id'"),
        (row(id=None), r"d\.jsonl:2: row has no 'id'"),
        (b'{"id": "2", "question": "\\udc00", "golden_answers": ["a"]}', r"d\.jsonl:2: .*unpaired surrogate"),
        (b"[1, 2]", r"d\.jsonl:2: expected a JSON object"),
    ],
)
def test_bad_row_names_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "d.jsonl"
    path.write_bytes(GOOD + b"\n" + line + b"\n")
    with pytest.raises(DatasetError, match=message) as info:
        read_jsonl_questions(path, "d")
    assert isinstance(info.value, UserError)


def test_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD + b"\r\n")
    assert [q.question for q in read_jsonl_questions(path, "d")] == ["Who?"]


def test_unreadable_file_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="cannot read the file"):
        read_jsonl_questions(tmp_path, "d")  # a directory: open() fails as it does for a missing permission


def test_target_pool_bad_utf8_and_json_name_the_line(tmp_path):
    path = tmp_path / "pool.txt"
    path.write_bytes(b"fine target\n\xff\xfe\n")
    with pytest.raises(DatasetError, match=r"pool\.txt:2: not valid UTF-8"):
        read_target_pool(path)
    path.write_bytes(b'{"question": "x"}\n{oops\n')
    with pytest.raises(DatasetError, match=r"pool\.txt:2: not valid JSON"):
        read_target_pool(path)
    path.write_bytes(b'{"question": "x"}\n{"target": "\\ud800"}\n')
    with pytest.raises(DatasetError, match=r"pool\.txt:2: 'target' holds an unpaired surrogate"):
        read_target_pool(path)


# Lone surrogates (category Cs) come out of json.dumps as \udXXX escapes: valid JSON, unencodable text.
_chars = st.characters(categories=["L", "N", "P", "Z", "Cs"])
_texts = st.text(_chars, max_size=20)
_words = st.text(_chars, min_size=1, max_size=20)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_subnormal=False)
    | _texts,  # earlier tests set flush-to-zero (torch)
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_good_rows = st.fixed_dictionaries(
    {"id": _words, "question": _words, "golden_answers": st.lists(_words, max_size=2)}
).map(lambda r: json.dumps(r).encode())
_any_rows = st.fixed_dictionaries(
    {}, optional={"id": _json_values, "question": _json_values, "golden_answers": _json_values}
).map(lambda r: json.dumps(r).encode())
_rows = st.one_of(_good_rows, _any_rows)
_noise = st.one_of(st.binary(max_size=40), st.text(max_size=40).map(str.encode))
# One bad line stops the reader, so files of rows alone are drawn too: those are the ones that load.
_lines = st.one_of(
    st.lists(_good_rows, min_size=1, max_size=5), st.lists(st.one_of(_rows, _noise), max_size=6)
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=_lines)
def test_fuzzed_eval_file_loads_or_names_the_file(lines):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.jsonl"
        path.write_bytes(b"\n".join(lines))
        for read in (lambda: read_jsonl_questions(path, "fuzz"), lambda: read_target_pool(path)):
            try:
                got = read()
            except UserError as e:
                assert str(path) in str(e)
                continue
            for item in got:  # whatever loads can be written back as UTF-8 (records, reports)
                json.dumps(item if isinstance(item, tuple) else vars(item), ensure_ascii=False).encode()
