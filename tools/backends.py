"""The search-backend contract and the factory that builds a backend from a :class:`SearchConfig`.

Every backend has ``search(queries, k) -> list[list[Doc]]``: one list per query, best first; an empty
or whitespace-only query gets an empty list, never an exception.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tools.config import SearchConfig
from tools.corpus import Doc
from tools.errors import ServiceError


class SearchUnavailableError(ServiceError, RuntimeError):
    """The retrieval server could not be reached or kept failing; the message names its URL."""


@runtime_checkable
class SearchBackend(Protocol):
    name: str  # "bm25" | "dense" | "http"

    def search(self, queries: list[str], k: int = 3) -> list[list[Doc]]: ...


def make_backend(cfg: SearchConfig) -> SearchBackend:
    """Build the backend ``cfg`` describes (BM25 / dense load or build their on-disk index here)."""
    # Imported lazily: the dense backend pulls in torch and faiss, which BM25 users should not pay for.
    if cfg.backend == "bm25":
        from tools.bm25 import BM25Backend

        return BM25Backend.from_corpus(cfg.corpus)
    if cfg.backend == "dense":
        from tools.dense import DenseBackend

        return DenseBackend.from_corpus(
            cfg.corpus, model=cfg.dense_model, device=cfg.device, batch_size=cfg.encode_batch_size
        )
    if cfg.backend == "http":
        from tools.http import HttpBackend

        return HttpBackend(
            cfg.url,
            timeout_s=cfg.timeout_s,
            retries=cfg.retries,
            backoff_s=cfg.backoff_s,
            connect_timeout_s=cfg.connect_timeout_s,
        )
    raise ValueError(f"unknown search backend {cfg.backend!r}; choose bm25, dense or http")


def search_nonempty(queries: list[str], search_fn) -> list[list[Doc]]:
    """Run ``search_fn`` on the non-blank queries only; blank ones get ``[]``. Keeps the input order."""
    live = [i for i, q in enumerate(queries) if isinstance(q, str) and q.strip()]
    out: list[list[Doc]] = [[] for _ in queries]
    if live:
        for i, docs in zip(live, search_fn([queries[i] for i in live]), strict=True):
            out[i] = docs
    return out
