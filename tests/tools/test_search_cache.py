"""A damaged index cache, or one built from other documents, is rebuilt with a warning: never a crash
and never results from the wrong index."""

import logging

import numpy as np
import pytest

from tools.bm25 import BM25Backend
from tools.cache_check import MANIFEST
from tools.corpus import Doc
from tools.dense import DenseBackend

QUERIES = ["iron tower in Paris", "German opera composer"]


def _truncate(path):
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: (d / "params.index.json").write_text('{"k1"'), "params.index.json has"),
        (lambda d: (d / "data.csc.index.npy").write_bytes(b"garbage"), "data.csc.index.npy has"),
        (lambda d: _truncate(d / "indices.csc.index.npy"), "indices.csc.index.npy has"),
        (lambda d: _flip_last_byte(d / "data.csc.index.npy"), "checksum mismatch"),
        (lambda d: (d / "vocab.index.json").unlink(), "vocab.index.json is missing"),
        (lambda d: (d / MANIFEST).unlink(), "missing"),
        (lambda d: (d / MANIFEST).write_text("{"), "unreadable"),
    ],
)
def test_damaged_bm25_cache_is_rebuilt_with_a_warning(small_docs, tmp_path, caplog, damage, reason):
    cache = tmp_path / "idx"
    expected = BM25Backend(small_docs, cache_dir=cache).search(QUERIES)
    damage(cache)
    with caplog.at_level(logging.WARNING, logger="tools.bm25"):
        again = BM25Backend(small_docs, cache_dir=cache)
    assert not again.loaded_from_cache and again.search(QUERIES) == expected
    assert reason in caplog.text and str(cache) in caplog.text
    assert BM25Backend(small_docs, cache_dir=cache).loaded_from_cache  # the rebuilt cache is good again


def test_bm25_cache_of_other_docs_is_never_used(small_docs, tmp_path, caplog):
    cache = tmp_path / "idx"
    other = [Doc(d.id, d.title, f"unrelated words number {i}") for i, d in enumerate(small_docs)]
    BM25Backend(other, cache_dir=cache)  # same size, same ids: only the manifest tells them apart
    with caplog.at_level(logging.WARNING, logger="tools.bm25"):
        bm25 = BM25Backend(small_docs, cache_dir=cache)
    assert not bm25.loaded_from_cache and "another corpus" in caplog.text
    assert bm25.search(["iron tower in Paris"])[0][0].title == "Eiffel Tower"


class FakeEncoder:
    """Deterministic unit vectors, so the dense cache can be tested without loading a model."""

    def __init__(self):
        self.calls = 0

    def encode_documents(self, texts):
        self.calls += 1
        rng = np.random.default_rng(len(texts))
        v = rng.normal(size=(len(texts), 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize(
    "damage",
    [
        lambda f: f.write_bytes(b"garbage"),
        _truncate,
        lambda f: np.save(f, np.full((5, 8), np.nan, dtype=np.float32)),
        lambda f: f.with_name("emb.manifest.json").unlink(),  # a matrix whose writer died before the manifest
    ],
)
def test_damaged_dense_cache_is_recomputed(small_docs, tmp_path, caplog, damage):
    cache = tmp_path / "emb.npy"
    enc = FakeEncoder()
    first = DenseBackend(small_docs, enc, cache_file=cache)
    damage(cache)
    with caplog.at_level(logging.WARNING, logger="tools.dense"):
        again = DenseBackend(small_docs, enc, cache_file=cache)
    assert not again.loaded_from_cache and enc.calls == 2 and "unusable" in caplog.text
    np.testing.assert_array_equal(again.index.reconstruct_n(0, 5), first.index.reconstruct_n(0, 5))
    assert DenseBackend(small_docs, enc, cache_file=cache).loaded_from_cache and enc.calls == 2


def test_dense_cache_of_other_docs_is_never_used(small_docs, tmp_path):
    cache = tmp_path / "emb.npy"
    enc = FakeEncoder()
    DenseBackend([Doc(d.id, d.title, "other") for d in small_docs], enc, cache_file=cache)
    assert not DenseBackend(small_docs, enc, cache_file=cache).loaded_from_cache and enc.calls == 2
