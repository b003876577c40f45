"""Dense search: sentence-transformers (via :class:`tools.encoder.Encoder`) + an exact FAISS inner-product
index. Vectors are L2-normalized, so scores are cosine similarities.

Each doc is encoded as ``title + "\\n" + text`` (as a document/passage). The document matrix is cached
under ``sesa_home()/dense/<corpus_hash>/<model>.npy``; ``search_vectors`` searches pre-encoded queries so
the index can be timed without the encoder.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import faiss
import numpy as np

from tools.assets import sesa_home
from tools.backends import search_nonempty
from tools.cache_check import manifest_problem, write_manifest
from tools.corpus import Doc, corpus_hash, load_corpus
from tools.encoder import Encoder

log = logging.getLogger(__name__)


def _manifest(cache_file: Path) -> Path:
    return cache_file.with_name(f"{cache_file.stem}.manifest.json")


def _load_cached(cache_file: Path, docs_hash: str, num_docs: int) -> np.ndarray | None:
    """The cached document matrix, or None (with a warning) when it is damaged or for other docs."""
    problem = manifest_problem(_manifest(cache_file), docs_hash, num_docs)
    if problem is None:
        try:
            vectors = np.load(cache_file, allow_pickle=False)
            if vectors.ndim != 2 or vectors.shape[0] != num_docs or not np.isfinite(vectors).all():
                problem = f"it holds an array of shape {vectors.shape} with non-finite values or wrong rows"
        except (OSError, ValueError, EOFError) as e:
            problem = f"it cannot be loaded ({type(e).__name__}: {e})"
    if problem is None:
        return vectors
    log.warning("dense embeddings cache %s is unusable (%s); encoding the corpus again", cache_file, problem)
    return None


def _save_cached(cache_file: Path, vectors: np.ndarray, docs_hash: str) -> None:
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache_file.with_name(f"{cache_file.stem}.tmp-{os.getpid()}.npy")
    np.save(tmp, vectors)
    os.replace(tmp, cache_file)  # atomic: readers never see a partial file
    # Written after the matrix: a matrix without a matching manifest is never trusted.
    tmp_manifest = _manifest(tmp)
    write_manifest(tmp_manifest, docs_hash, vectors.shape[0], [cache_file])
    os.replace(tmp_manifest, _manifest(cache_file))


def embeddings_path(docs: list[Doc], model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")
    return sesa_home() / "dense" / corpus_hash(docs) / f"{slug}.npy"


class DenseBackend:
    name = "dense"

    def __init__(self, docs: list[Doc], encoder: Encoder, cache_file: Path | None = None) -> None:
        """Encode ``docs`` (or read them from ``cache_file`` when it exists) into a FAISS index."""
        if not docs:
            raise ValueError("cannot build a dense index over an empty corpus")
        self.docs = docs
        self.encoder = encoder
        self.loaded_from_cache = False
        vectors = None
        if cache_file is not None and cache_file.exists():
            vectors = _load_cached(cache_file, corpus_hash(docs), len(docs))
            self.loaded_from_cache = vectors is not None
        if vectors is None:
            vectors = encoder.encode_documents([f"{d.title}\n{d.text}" for d in docs])
            if cache_file is not None:
                _save_cached(cache_file, vectors, corpus_hash(docs))
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    @classmethod
    def from_corpus(
        cls, spec: str = "embedded", model: str = "embedded", device: str = "cpu", batch_size: int = 64
    ) -> DenseBackend:
        docs = load_corpus(spec)
        encoder = Encoder(model, device=device, batch_size=batch_size)
        return cls(docs, encoder, cache_file=embeddings_path(docs, model))

    def search(self, queries: list[str], k: int = 3) -> list[list[Doc]]:
        return search_nonempty(queries, lambda qs: self.search_vectors(self.encoder.encode_queries(qs), k))

    def search_vectors(self, query_vecs: np.ndarray, k: int = 3) -> list[list[Doc]]:
        """Top-``k`` docs for each row of ``query_vecs`` (normalized float32, shape ``[n, dim]``)."""
        query_vecs = np.ascontiguousarray(query_vecs, dtype=np.float32).reshape(-1, self.index.d)
        scores, ids = self.index.search(query_vecs, min(k, len(self.docs)))
        return [
            [self._doc(int(i), float(s)) for i, s in zip(row_ids, row_scores, strict=True) if i >= 0]
            for row_ids, row_scores in zip(ids, scores, strict=True)
        ]

    def _doc(self, i: int, score: float) -> Doc:
        d = self.docs[i]
        return Doc(id=d.id, title=d.title, text=d.text, score=score)
