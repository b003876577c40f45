"""What the probe generator knows about a held-out article: its first clause, nationality (people), a
specific description, the noun that names its kind, and the corpus articles its opening names.

Every answer must be readable: it is in the first ``DOC_CHARS`` characters of the answer-bearing
article, the cut every search result is shown at ("the start of the summary" in the questions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from sesa_graph.config import SolverConfig
from sesa_graph.corpus.articles import Article, all_articles
from sesa_graph.corpus.facts import first_clause, nationality
from sesa_graph.corpus.heldout import is_held_out, name_index, opening_names
from sesa_graph.scoring import contains_answer, normalize_answer

DOC_CHARS = SolverConfig().doc_chars

_HEAD_CUT = re.compile(
    r"\b(?:of|in|on|at|by|for|from|with|that|which|who|and|or|between|near|around|within|under|over|along|"
    r"across|about|after|before|during|to|as|founded|based|located)\b"
)


@dataclass
class Facts:
    """The usable facts of one held-out article (``None``: not usable)."""

    article: Article
    noun: str | None = None  # "country", "musician", "person"
    clause: tuple[str, str, str] | None = None  # (verb, det, predicate) of the first sentence
    description: str | None = None  # specific and unique in the corpus
    nationality: str | None = None
    named: list[str] = field(default_factory=list)  # titles of corpus articles its opening names, in order

    @property
    def name(self) -> str:
        return self.article.name

    @property
    def title(self) -> str:
        return self.article.title


def readable(a: Article, answer: str) -> bool:
    """The answer is in the cut of ``a`` the agent reads (normalized, whole words)."""
    return contains_answer(a.text[:DOC_CHARS], [answer])


_SAME_NOUN = {
    "microstate": "country",
    "nation": "country",
    "capital": "city",
    "metropolis": "city",
    "organisation": "organization",
}
# kinds a reader can picture and a question can ask "which <kind>" about; anything vaguer is dropped
_KINDS = {
    "person",
    "state",
    "city",
    "country",
    "language",
    "river",
    "region",
    "range",
    "lake",
    "island",
    "province",
    "empire",
    "university",
    "territory",
    "kingdom",
    "dynasty",
    "mountain",
    "museum",
    "park",
    "galaxy",
    "planet",
    "peninsula",
    "archipelago",
    "strait",
    "desert",
    "continent",
    "organization",
    "religion",
    "subregion",
    "constellation",
    "moon",
    "satellite",
    "star",
    "deity",
    "goddess",
    "company",
    "novel",
    "film",
    "book",
    "poem",
    "opera",
    "play",
    "church",
    "building",
    "prefecture",
    "municipality",
    "department",
    "agency",
    "league",
    "civilization",
    "period",
    "conflict",
    "war",
    "battle",
    "species",
    "genus",
    "element",
    "compound",
    "disease",
    "instrument",
    "sport",
    "genre",
    "movement",
    "alphabet",
    "script",
    "currency",
    "bay",
    "gulf",
    "canal",
    "volcano",
    "plateau",
    "basin",
    "valley",
    "band",
    "philosopher",
    "emperor",
    "general",
    "composer",
    "painter",
    "writer",
    "poet",
    "scientist",
    "physicist",
    "mathematician",
    "king",
    "queen",
    "prophet",
    "mineral",
    "alloy",
    "bird",
    "fish",
    "mammal",
    "plant",
    "tree",
    "fruit",
    "vegetable",
    "beverage",
    "dish",
    "festival",
    "holiday",
    "treaty",
    "ship",
    "aircraft",
}
_GROUPS = {"band", "group", "duo", "family", "dynasty", "team", "ensemble", "orchestra", "company"}


def noun_of(a: Article) -> str | None:
    """The head noun of the description, cut before its first preposition or participle
    (``Country in Central Asia`` -> ``country``, ``Galaxy containing the Solar System`` -> ``galaxy``),
    if it is one of ``_KINDS``; ``person`` for the People topic (not for bands and families)."""
    words = re.sub(r"\([^)]*\)", "", a.description).lower().replace(",", " ").split()
    head = []
    for i, w in enumerate(words):
        if _HEAD_CUT.fullmatch(w) or (i and re.fullmatch(r"[a-z]+(?:ing|ed|ly)", w)):
            break
        head.append(w)
    noun = _SAME_NOUN.get(head[-1], head[-1]) if head else ""
    if a.topic == "People" and noun not in _GROUPS:
        return "person"
    return noun if noun in _KINDS else None


def _specific(a: Article) -> bool:
    """A description that names one thing: a digit or a proper noun in it, and not the name itself."""
    words = a.description.split()
    if len(words) < 3 or "(" in a.description or contains_answer(a.description, [a.name]):
        return False
    return bool(re.search(r"\d", a.description) or any(w[:1].isupper() for w in words[1:]))


def _bare(description: str) -> str:
    return normalize_answer(re.sub(r"\s*\([^)]*\)", "", description))


@lru_cache(maxsize=1)
def description_counts() -> dict[str, int]:
    """Normalized description (its parentheses dropped) -> how many corpus articles carry it."""
    out: dict[str, int] = {}
    for a in all_articles():
        out[_bare(a.description)] = out.get(_bare(a.description), 0) + 1
    return out


def specific_description(a: Article, counts: dict[str, int]) -> str | None:
    """``a``'s description if it names one thing (:func:`_specific`) and no other article carries it."""
    return a.description if _specific(a) and counts[_bare(a.description)] == 1 else None


def named_in(a: Article) -> list[str]:
    """Titles of the corpus articles ``a``'s opening names (``sesa_graph.corpus.heldout.opening_names``)."""
    return opening_names(a.title, a.text, _index())


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    return name_index(a.title for a in all_articles())


@lru_cache(maxsize=1)
def corpus_facts() -> dict[str, Facts]:
    """Facts of every corpus article, by title (the generator asks only about held-out ones, but checks
    ambiguity against all)."""
    arts = all_articles()
    desc_count = description_counts()
    out: dict[str, Facts] = {}
    for a in arts:
        f = Facts(a, noun_of(a))
        if is_held_out(a.title):
            c = first_clause(a, DOC_CHARS)
            f.clause = (c.verb, c.det, c.predicate) if c else None
            f.description = specific_description(a, desc_count)
            nat = nationality(a, DOC_CHARS)
            f.nationality = nat if nat and readable(a, nat) else None
            f.named = named_in(a)
        out[a.title] = f
    return out


def held_out_facts() -> dict[str, Facts]:
    return {t: f for t, f in corpus_facts().items() if is_held_out(t)}
