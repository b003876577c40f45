"""What probe v2 knows about an article at the eval's cut: v1's facts (``sesa_eval.probe.facts``) read at
``cut`` characters instead of 400, its links found by :mod:`sesa_eval.probe.names`, and for every name its
opening shows, the kinds that name may have (so a "which <kind>" question is checked against all of them).

Kinds compare by family: asking "which country" is ambiguous when the opening also names a kingdom.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from sesa_eval.probe.facts import Facts, description_counts, noun_of, specific_description
from sesa_eval.probe.names import WORK_KINDS, aliases, mentions, says_kind, senses
from sesa_graph.corpus.articles import all_articles
from sesa_graph.corpus.facts import first_clause, nationality
from sesa_graph.corpus.heldout import is_held_out
from sesa_graph.scoring import contains_answer

_PEOPLE = {
    "person",
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
    "deity",
    "goddess",
}
_FAMILIES = (
    _PEOPLE,
    {"country", "state", "kingdom", "empire", "nation", "territory"},
    {"city", "municipality", "capital"},
    {"region", "subregion", "province", "territory", "department", "prefecture"},
    {"range", "mountain", "volcano"},
    {"bay", "gulf", "strait", "canal"},
    {"novel", "book", "poem", "play"},
    {"company", "organization", "agency"},
    {"war", "conflict", "battle"},
    {"country", "island"},  # "Ireland" is an island article and a country a reader may name
)
_PERSONISH = re.compile(r"[A-Z][a-z]+(?: [A-Z][a-z.]+){1,3}")


def family(kind: str | None) -> frozenset[str]:
    """The kinds a reader may take for ``kind`` (itself included)."""
    if not kind:
        return frozenset()
    return frozenset({kind}.union(*(f for f in _FAMILIES if kind in f)))


@dataclass
class FactsV2(Facts):
    """v1's facts at the cut, plus the name's aliases and every kind each visible name may have."""

    aliases: tuple[str, ...] = ()
    kinds_named: dict[str, frozenset[str]] = field(default_factory=dict)  # span -> kinds it may have


@lru_cache(maxsize=4)
def corpus_facts_v2(cut: int) -> dict[str, FactsV2]:
    """Facts of every corpus article at ``cut`` characters, by title; links only from held-out ones."""
    arts = all_articles()
    nouns = {a.title: noun_of(a) for a in arts}
    counts = description_counts()
    out: dict[str, FactsV2] = {}
    for a in arts:
        f = FactsV2(a, nouns[a.title])
        if is_held_out(a.title):
            c = first_clause(a, cut)
            f.clause = (c.verb, c.det, c.predicate) if c else None
            f.description = specific_description(a, counts)
            nat = nationality(a, cut)
            f.nationality = nat if nat and contains_answer(a.text[:cut], [nat]) else None
            f.aliases = aliases(a, cut)
            f.named, f.kinds_named = links(a.title, a.text, cut, nouns)
        out[a.title] = f
    return out


def links(
    title: str, text: str, cut: int, nouns: dict[str, str | None]
) -> tuple[list[str], dict[str, frozenset[str]]]:
    """(titles the opening names without doubt, in order; visible span -> the kinds it may have).

    A link needs a span with one sense in the corpus, not the article itself, longer than three letters,
    and for a film, novel, band and the like the opening saying that kind next to it (no cross-sense
    links: "Gandhi" the man is not "Gandhi" the film). A span no article carries that looks like a
    personal name may be a person."""
    named: list[str] = []
    kinds: dict[str, set[str]] = {}
    for m in mentions(text, cut):
        ts = [t for t in senses(m.text) if t != title]
        ks = kinds.setdefault(m.text, set())
        ks.update(k for t in ts for k in family(nouns.get(t)))
        if not ts and _PERSONISH.fullmatch(m.text):
            ks.update(_PEOPLE)
        if len(ts) != 1 or len(m.text) <= 3 or ts[0] in named:
            continue
        kind = nouns.get(ts[0])
        if kind in WORK_KINDS and not says_kind(text, m, kind):
            continue
        named.append(ts[0])
    return named, {s: frozenset(k) for s, k in kinds.items()}


def rivals(f: FactsV2, answer: FactsV2) -> list[str]:
    """The other spans of ``f``'s opening that may be of ``answer``'s kind: a "which <kind>" question
    about ``answer`` is fair only without them."""
    fam = family(answer.noun)
    mine = {answer.name, answer.title, *answer.aliases}
    return [
        s
        for s, ks in f.kinds_named.items()
        if s not in mine and s.removeprefix("The ") not in mine and ks & fam
    ]
