"""A manifest beside each on-disk index (BM25, dense embeddings) that says which corpus it was built from
and what its files held, so a damaged cache or one built from another corpus is rebuilt, never used.

The cache directory name is already the corpus hash, but a directory can be copied, half-written by a
killed process, or damaged on disk; the files themselves say nothing about the corpus, and a wrong
index still returns plausible-looking documents.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST = "sesa_manifest.json"
_FORMAT = 1


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(manifest: Path, corpus_hash: str, num_docs: int, files: list[Path]) -> None:
    """Record ``files`` (sizes and SHA-256) and the corpus they index. Written last, so a cache without
    one is incomplete."""
    entry = {
        "format": _FORMAT,
        "corpus_hash": corpus_hash,
        "num_docs": num_docs,
        "files": {p.name: {"bytes": p.stat().st_size, "sha256": _digest(p)} for p in files},
    }
    manifest.write_text(json.dumps(entry, indent=1), encoding="utf-8")


def manifest_problem(manifest: Path, corpus_hash: str, num_docs: int) -> str | None:
    """Why the cache described by ``manifest`` cannot be used for this corpus, or None when it can."""
    try:
        entry = json.loads(manifest.read_text(encoding="utf-8"))
        files = entry["files"]
        built_for, built_docs = entry["corpus_hash"], entry["num_docs"]
    except FileNotFoundError:
        return f"{manifest.name} is missing (an unfinished or older cache)"
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{manifest.name} is unreadable ({type(e).__name__}: {e})"
    if built_for != corpus_hash or built_docs != num_docs:
        return f"built from another corpus ({built_docs} docs, hash {built_for}; this one: {num_docs}, {corpus_hash})"
    for name, want in files.items():
        path = manifest.parent / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != want["bytes"]:
            return f"{name} has {path.stat().st_size} bytes, {want['bytes']} when written"
        if _digest(path) != want["sha256"]:
            return f"{name} changed since it was written (checksum mismatch)"
    return None
