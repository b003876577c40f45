"""Fuzz the corpus reader: any bytes either load or raise a UserError naming the file, never another
exception (a traceback, or a crash later when the documents are hashed or indexed)."""

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.corpus import corpus_hash, load_jsonl_corpus
from tools.errors import UserError

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
# Lines near the real format reach the field checks; raw bytes reach the decoder and the JSON parser.
_good_rows = st.fixed_dictionaries({"id": st.one_of(_words, st.integers()), "contents": _words}).map(
    lambda r: json.dumps(r).encode()
)
_rows = st.one_of(
    _good_rows,
    st.fixed_dictionaries({}, optional={"id": _json_values, "contents": _json_values}).map(
        lambda r: json.dumps(r).encode()
    ),
)
_noise = st.one_of(st.binary(max_size=40), st.text(max_size=40).map(str.encode))
# One bad line stops the reader, so files of rows alone are drawn too: those are the ones that load.
_lines = st.one_of(
    st.lists(_good_rows, min_size=1, max_size=5), st.lists(st.one_of(_rows, _noise), max_size=6)
)


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
