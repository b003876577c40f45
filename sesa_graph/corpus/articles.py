"""The embedded corpus's articles, each with its Wikidata description and topic: every article
(:func:`all_articles`, what the probe generator asks about and checks ambiguity against) and the ones
training may use (:func:`load_articles`, held-out articles (:mod:`sesa_graph.corpus.heldout`) left out, so
no warm-up example or bootstrap question is built from one)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from sesa_graph.corpus.heldout import article_name, is_held_out
from tools.assets import embedded_corpus_file


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
        return article_name(self.title)


@lru_cache(maxsize=1)
def all_articles() -> tuple[Article, ...]:
    """Every embedded-corpus article, held out or not, sorted by title."""
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
    )


@lru_cache(maxsize=1)
def _training_articles() -> tuple[Article, ...]:
    return tuple(a for a in all_articles() if not is_held_out(a.title))


def load_articles() -> list[Article]:
    """The embedded corpus (same titles and texts as ``tools.corpus.load_embedded_corpus``, less the
    held-out articles) with the Wikidata description and topic of each article. Every article an example
    names -- its answer, a bridge, a comparison partner, a deliberately missed one -- comes from this list
    (``Synthesizer.articles``/``by_name``), so the exclusion here covers every kind."""
    return list(_training_articles())
