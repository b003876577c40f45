"""Fuzz the corpus reader: any bytes either load or raise a UserError naming the file, never another
exception (a traceback, or a crash later when the documents are hashed or indexed)."""

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.corpus import corpus_hash, load_jsonl_corpus
from tools.errors import UserError

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
# Lines near the real format reach the field checks; raw bytes reach the decoder and the JSON parser.
_rows = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(_json_values, st.text(max_size=6)),
        "contents": st.one_of(_json_values, st.text()),
    },
).map(lambda row: json.dumps(row).encode())
_lines = st.lists(st.one_of(_rows, st.binary(max_size=40), st.text(max_size=40).map(str.encode)), max_size=6)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=_lines, ending=st.sampled_from([b"\n", b"\r\n", b""]))
def test_corpus_reader_loads_or_names_the_file(lines, ending):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.jsonl"
        path.write_bytes(b"\n".join(lines) + ending)
        try:
            docs = load_jsonl_corpus(path)
        except UserError as e:
            assert str(path) in str(e)
            return
        assert docs and len({doc.id for doc in docs}) == len(docs)
        corpus_hash(docs)  # every loaded text is encodable, so hashing (and indexing) cannot crash
