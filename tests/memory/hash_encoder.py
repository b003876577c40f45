"""A deterministic stand-in for the embedder (hashed bag of words, unit vectors): banks without the model,
for tests that exercise files, locks and journals rather than retrieval quality."""

import hashlib

import numpy as np


class HashEncoder:
    dim = 64

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, np.float32)
        for word in text.lower().split():
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        return v / (np.linalg.norm(v) or 1.0)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    encode_queries = encode_documents
