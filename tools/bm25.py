"""BM25 search with ``bm25s`` (English Snowball stemmer, English stopwords, default Lucene BM25).

Each doc is indexed as ``title + "\\n" + text``. The index is built once per corpus and cached under
``sesa_home()/bm25/<corpus_hash>/``; later loads read the cache. Retrieval uses bm25s' numpy path
(numba is not a dependency), one batched ``retrieve`` call per ``search``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

from tools.assets import sesa_home
from tools.backends import search_nonempty
from tools.corpus import Doc, corpus_hash, load_corpus


def _tokenize(texts: list[str], stemmer) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)


class BM25Backend:
    name = "bm25"

    def __init__(self, docs: list[Doc], cache_dir: Path | None = None) -> None:
        """Index ``docs``; with ``cache_dir`` the index is loaded from there, or built and saved there."""
        if not docs:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        self.docs = docs
        self.stemmer = Stemmer.Stemmer("english")
        self.cache_dir = cache_dir
        self.loaded_from_cache = cache_dir is not None and (cache_dir / "params.index.json").exists()
        if self.loaded_from_cache:
            self.retriever = bm25s.BM25.load(str(cache_dir), show_progress=False, verbosity=0)
        else:
            self.retriever = bm25s.BM25()
            tokens = _tokenize([f"{d.title}\n{d.text}" for d in docs], self.stemmer)
            self.retriever.index(tokens, show_progress=False)
            if cache_dir is not None:
                self._save(cache_dir)
        if self.retriever.scores["num_docs"] != len(docs):
            raise ValueError(f"BM25 index at {cache_dir} does not match the corpus; delete the directory")

    @classmethod
    def from_corpus(cls, spec: str = "embedded") -> BM25Backend:
        docs = load_corpus(spec)
        return cls(docs, cache_dir=sesa_home() / "bm25" / corpus_hash(docs))

    def _save(self, cache_dir: Path) -> None:
        # Write to a private directory and rename it into place, so a concurrent reader never sees a
        # half-written index; if another process won the race, keep theirs.
        tmp = cache_dir.with_name(f"{cache_dir.name}.tmp-{os.getpid()}")
        self.retriever.save(str(tmp), show_progress=False)
        try:
            os.replace(tmp, cache_dir)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)

    def search(self, queries: list[str], k: int = 3) -> list[list[Doc]]:
        return search_nonempty(queries, lambda qs: self._search(qs, k))

    def _search(self, queries: list[str], k: int) -> list[list[Doc]]:
        k = min(k, len(self.docs))
        ids, scores = self.retriever.retrieve(_tokenize(queries, self.stemmer), k=k, show_progress=False)
        return [
            # A query whose terms are all unknown or stopwords scores 0 everywhere: those are not hits.
            [self._doc(int(i), float(s)) for i, s in zip(row_ids, row_scores, strict=True) if s > 0]
            for row_ids, row_scores in zip(np.asarray(ids), np.asarray(scores), strict=True)
        ]

    def _doc(self, i: int, score: float) -> Doc:
        d = self.docs[i]
        return Doc(id=d.id, title=d.title, text=d.text, score=score)
