"""Probe v2's reading of names: which corpus articles an article's visible opening names, every sense a
name can have, and the other names a gold answer goes by.

v1 found names with ``sesa_graph.corpus.heldout``'s span, which the split must keep (changing it is a new split):
that span joins "Israel and Lebanon" and "Tonga. The" into one name, so the link it misses left questions
with a second valid answer. Here a name never crosses "and" or a sentence end (a dot ends a word unless a
letter follows it, as in "U.S."), and every candidate an opening holds is kept, so a question can be
checked against all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from sesa_graph.corpus.articles import Article, all_articles
from sesa_graph.corpus.heldout import article_name
from sesa_graph.scoring import normalize_answer

_WORD = r"[A-Z](?:[\w'’-]|\.(?=\w))*"
_CONNECT = r"(?:of|the|de|da|von|van|del|al|el|bin|du|di|la|le)"
SPAN = re.compile(rf"{_WORD}(?:(?: {_CONNECT})* {_WORD})*")

# kinds whose articles often share a name with what an opening means (the film of the novel, the band of
# the city): a link to one counts only when the opening says the kind next to the name
WORK_KINDS = frozenset(
    {"film", "novel", "book", "poem", "opera", "play", "band", "ship", "company", "genre", "aircraft"}
)
# sentence-initial words and other capitalized words that never name a thing a question asks about
_NOT_NAMES = frozenset(
    {"The", "A", "An", "It", "In", "On", "At", "He", "She", "They", "This", "Its", "His", "Her"}
)
_ALIAS = re.compile(
    r"(?:also (?:known|called|spelled|written) (?:as )?|commonly (?:known as |called )|officially |"
    r"or simply |formerly (?:known as )?)(?:the )?([A-Z][\w'’.-]*(?: (?:of |the |de )*[A-Z][\w'’.-]*){0,4})"
)


@dataclass(frozen=True)
class Mention:
    """A capitalized span of an opening: its text and where it starts."""

    text: str
    start: int


def mentions(text: str, cut: int) -> list[Mention]:
    """Every name-like span in the first ``cut`` characters, never across "and" or a sentence end (a dot
    before a space ends the name: "U.S. Navy" gives "U.S" and "Navy", a miss rather than a join), a leading
    "The" dropped (:func:`senses` normalizes it away as well)."""
    out = []
    for m in SPAN.finditer(text[:cut]):
        span = m.group(0)
        if m.end() == cut and cut < len(text) and text[cut].isalnum():
            continue  # a word cut in two by the window is no name
        start = m.start()
        if span.startswith("The "):
            span, start = span[4:], start + 4
        if span not in _NOT_NAMES:
            out.append(Mention(span, start))
    return out


@lru_cache(maxsize=1)
def _all_senses() -> dict[str, tuple[str, ...]]:
    return sense_index(a.title for a in all_articles())


def sense_index(titles: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Normalized name -> every title carrying it (``Georgia`` -> ``Georgia (country)``, ``Georgia (U.S.
    state)``), so a mention can be checked against every article it might mean."""
    out: dict[str, list[str]] = {}
    for t in titles:
        out.setdefault(normalize_answer(article_name(t)), []).append(t)
    return {k: tuple(v) for k, v in out.items() if k}


def senses(span: str, index: dict[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """The titles ``span`` may mean (a leading "The" tried with and without)."""
    index = _all_senses() if index is None else index
    found = index.get(normalize_answer(span), ())
    if not found and span.startswith("The "):
        found = index.get(normalize_answer(span[4:]), ())
    return found


def says_kind(text: str, m: Mention, kind: str) -> bool:
    """The opening names ``kind`` within a few words of the mention ("the 1959 film Ben-Hur")."""
    before = text[max(0, m.start - 40) : m.start].lower()
    after = text[m.start + len(m.text) : m.start + len(m.text) + 25].lower()
    return kind in before.split()[-4:] or kind in after.split()[:3]


def aliases(a: Article, cut: int) -> tuple[str, ...]:
    """The name, then the other names the visible opening gives it ("also known as ...", "officially ..."),
    each at least 4 characters; EM against any of them is a right answer."""
    out = [a.name]
    for m in _ALIAS.finditer(a.text[:cut]):
        alias = m.group(1).rstrip(".")
        if len(normalize_answer(alias)) >= 4 and normalize_answer(alias) not in map(normalize_answer, out):
            out.append(alias)
    return tuple(out)
