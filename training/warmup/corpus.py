"""The embedded corpus the warm-up writes its examples from, with each article's Wikidata description
and topic; held-out articles (``sesa_graph.heldout``) are left out, so no example is built from one."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

from sesa_graph.heldout import is_held_out
from tools.assets import embedded_corpus_file

_PAREN_TAIL = re.compile(r"\s*\([^()]*\)$")


@dataclass(frozen=True)
class Article:
    """An embedded-corpus article; ``text`` is the extract the search backend indexes."""

    title: str
    text: str
    description: str = ""
    topic: str = ""

    @property
    def name(self) -> str:
        """The title without a trailing disambiguation: ``Shock (circulatory)`` -> ``Shock``."""
        return _PAREN_TAIL.sub("", self.title).strip() or self.title


@lru_cache(maxsize=1)
def _articles() -> tuple[Article, ...]:
    with open(embedded_corpus_file(), encoding="utf-8") as f:
        raw = json.load(f)
    return tuple(
        Article(
            title,
            raw[title].get("extract") or "",
            (raw[title].get("description") or "").strip(),
            raw[title].get("topic") or "",
        )
        for title in sorted(raw)
        if not is_held_out(title)
    )


def load_articles() -> list[Article]:
    """The embedded corpus (same titles and texts as ``tools.corpus.load_embedded_corpus``, less the
    held-out articles) with the Wikidata description and topic of each article. Every article an example
    names -- its answer, a bridge, a comparison partner, a deliberately missed one -- comes from this list
    (``Synthesizer.articles``/``by_name``), so the exclusion here covers every kind."""
    return list(_articles())
