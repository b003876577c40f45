from tools.bm25 import BM25Backend


def test_finds_the_right_doc(small_docs):
    bm25 = BM25Backend(small_docs)
    results = bm25.search(["iron tower in Paris", "who created Python?"], k=2)
    assert [r[0].title for r in results] == ["Eiffel Tower", "Python (programming language)"]
    assert all(len(r) <= 2 for r in results)
    assert results[0][0].score > 0 and results[0][0].text == small_docs[0].text


def test_blank_and_unmatched_queries_get_empty_lists(small_docs):
    bm25 = BM25Backend(small_docs)
    results = bm25.search(["", "   \n", "the of and", "zzzqqqx", "mountain"], k=3)
    assert results[:4] == [[], [], [], []]  # blank, whitespace, stopwords only, unknown word
    assert results[4][0].title == "Mount Everest"
    assert bm25.search([]) == []


def test_k_larger_than_corpus(small_docs):
    assert len(BM25Backend(small_docs).search(["composer tower cat python mountain"], k=50)[0]) == 5


def test_index_cache_is_reused(small_docs, tmp_path):
    first = BM25Backend(small_docs, cache_dir=tmp_path / "idx")
    second = BM25Backend(small_docs, cache_dir=tmp_path / "idx")
    assert not first.loaded_from_cache and second.loaded_from_cache
    assert first.search(["German opera composer"]) == second.search(["German opera composer"])


def test_embedded_corpus_finds_eiffel_tower(sesa_home):
    bm25 = BM25Backend.from_corpus("embedded")
    top3 = bm25.search(["iron lattice tower in Paris"], k=3)[0]
    assert "Eiffel Tower" in [d.title for d in top3]
    assert list((sesa_home / "bm25").iterdir())  # cached under sesa_home()/bm25/<corpus_hash>/
    assert BM25Backend.from_corpus("embedded").loaded_from_cache
