import numpy as np
import pytest

from tools.dense import DenseBackend, embeddings_path


def test_dense_search_with_embedded_minilm(small_docs, encoder, tmp_path):
    cache = tmp_path / "emb.npy"
    dense = DenseBackend(small_docs, encoder, cache_file=cache)
    results = dense.search(["a furry pet that purrs", "", "highest peak in the world"], k=2)
    assert results[0][0].title == "Cat" and results[1] == [] and results[2][0].title == "Mount Everest"
    assert -1.0 <= results[2][1].score <= results[2][0].score <= 1.0

    # search_vectors on pre-encoded queries gives the same answer as search
    vecs = encoder.encode_queries(["a furry pet that purrs"])
    (by_vector,) = dense.search_vectors(vecs, k=2)
    assert [d.id for d in by_vector] == [d.id for d in results[0]]
    assert [d.score for d in by_vector] == pytest.approx([d.score for d in results[0]], abs=1e-5)

    # second construction reads the cached embeddings
    again = DenseBackend(small_docs, encoder, cache_file=cache)
    assert again.loaded_from_cache and not dense.loaded_from_cache
    np.testing.assert_allclose(np.load(cache).shape, (5, encoder.dim))
    assert again.search(["a furry pet that purrs"], k=2)[0][0].title == "Cat"


def test_embeddings_path_keyed_by_corpus_and_model(small_docs, sesa_home):
    a = embeddings_path(small_docs, "embedded")
    assert a.parent.parent == sesa_home / "dense"
    assert embeddings_path(small_docs, "intfloat/e5-base-v2") != a
    assert embeddings_path(small_docs[:3], "embedded") != a
