"""BM25 search with ``bm25s`` (English Snowball stemmer, English stopwords, default Lucene BM25).

Each doc is indexed as ``title + "\\n" + text``. The index is built once per corpus and cached under
``sesa_home()/bm25/<corpus_hash>/`` with a manifest (:mod:`tools.cache_check`); later loads check the
manifest and read the cache. Retrieval uses bm25s' numpy path (numba is not a dependency), one batched
``retrieve`` call per ``search``.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

from tools.assets import sesa_home
from tools.backends import search_nonempty
from tools.cache_check import MANIFEST, manifest_problem, write_manifest
from tools.corpus import Doc, corpus_hash, load_corpus

log = logging.getLogger(__name__)


# PyStemmer's Stemmer keeps per-object state and is not safe to share between threads; the retrieval
# server calls search from a pool of threads, so each thread gets its own.
_stemmers = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    if not hasattr(_stemmers, "english"):
        _stemmers.english = Stemmer.Stemmer("english")
    return _stemmers.english


def _tokenize(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", stemmer=_stemmer(), return_ids=False, show_progress=False)


class BM25Backend:
    name = "bm25"

    def __init__(self, docs: list[Doc], cache_dir: Path | None = None, docs_hash: str | None = None) -> None:
        """Index ``docs``; with ``cache_dir`` the index is loaded from there, or built and saved there. A
        cache that is damaged or was built from other docs is rebuilt, with a warning."""
        if not docs:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        self.docs = docs
        self.cache_dir = cache_dir
        self.loaded_from_cache = False
        if cache_dir is not None and cache_dir.exists():
            docs_hash = docs_hash or corpus_hash(docs)
            self.loaded_from_cache = self._load(cache_dir, docs_hash)
        if not self.loaded_from_cache:
            self.retriever = bm25s.BM25()
            tokens = _tokenize([f"{d.title}\n{d.text}" for d in docs])
            self.retriever.index(tokens, show_progress=False)
            if cache_dir is not None:
                self._save(cache_dir, docs_hash or corpus_hash(docs))

    @classmethod
    def from_corpus(cls, spec: str = "embedded") -> BM25Backend:
        docs = load_corpus(spec)
        h = corpus_hash(docs)
        return cls(docs, cache_dir=sesa_home() / "bm25" / h, docs_hash=h)

    def _load(self, cache_dir: Path, docs_hash: str) -> bool:
        problem = manifest_problem(cache_dir / MANIFEST, docs_hash, len(self.docs))
        if problem is None:
            try:
                self.retriever = bm25s.BM25.load(str(cache_dir), show_progress=False, verbosity=0)
                if self.retriever.scores["num_docs"] != len(self.docs):
                    problem = f"it indexes {self.retriever.scores['num_docs']} docs, the corpus has {len(self.docs)}"
            except Exception as e:  # noqa: BLE001 -- bm25s raises whatever numpy/json raise on a bad file
                problem = f"it cannot be loaded ({type(e).__name__}: {e})"
        if problem is None:
            return True
        log.warning("BM25 index cache %s is unusable (%s); rebuilding it", cache_dir, problem)
        # Moved aside before deleting, so a concurrent reader never sees a half-deleted directory.
        trash = cache_dir.with_name(f"{cache_dir.name}.bad-{os.getpid()}")
        try:
            os.replace(cache_dir, trash)
            shutil.rmtree(trash, ignore_errors=True)
        except OSError:
            pass  # another process moved it first; _save then finds the path free or keeps theirs
        return False

    def _save(self, cache_dir: Path, docs_hash: str) -> None:
        # Write to a private directory and rename it into place, so a concurrent reader never sees a
        # half-written index; if another process won the race, keep theirs. The manifest is written
        # last: a directory without one was never finished.
        tmp = cache_dir.with_name(f"{cache_dir.name}.tmp-{os.getpid()}")
        self.retriever.save(str(tmp), show_progress=False)
        write_manifest(tmp / MANIFEST, docs_hash, len(self.docs), sorted(tmp.iterdir()))
        try:
            os.replace(tmp, cache_dir)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)

    def search(self, queries: list[str], k: int = 3) -> list[list[Doc]]:
        return search_nonempty(queries, lambda qs: self._search(qs, k))

    def _search(self, queries: list[str], k: int) -> list[list[Doc]]:
        k = min(k, len(self.docs))
        ids, scores = self.retriever.retrieve(_tokenize(queries), k=k, show_progress=False)
        return [
            # A query whose terms are all unknown or stopwords scores 0 everywhere: those are not hits.
            [self._doc(int(i), float(s)) for i, s in zip(row_ids, row_scores, strict=True) if s > 0]
            for row_ids, row_scores in zip(np.asarray(ids), np.asarray(scores), strict=True)
        ]

    def _doc(self, i: int, score: float) -> Doc:
        d = self.docs[i]
        return Doc(id=d.id, title=d.title, text=d.text, score=score)
