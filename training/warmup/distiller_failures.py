"""The failed rollouts the distiller's warm-up examples are about (:func:`make_failure`): for each question
type, a question drawn from the question synthesizer's corpus analysis with its gold answer, and the ways a
small solver gets it wrong (a surname that finds a namesake, one search on a two-hop question, the bridge
entity given as the answer, the question pasted as a query, ...), each with the answer and searches such a
rollout shows."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sesa_graph.corpus.articles import Article
from sesa_graph.corpus.facts import clue
from training.questions.synth import Synthesizer

# Words the corpus parser reads as a nationality ("a Classical composer") that are not demonyms.
_NOT_DEMONYMS = {
    "South",
    "North",
    "Central",
    "Ancient",
    "Classical",
    "Christian",
    "Sunni",
    "Muslim",
    "Church",
    "Buddhist",
    "Hindu",
    "Hong",
    "Neoplatonist",
    "Alid",
    "Brahmin",
    "Vedic",
    "Latin",
}
_COUNTRY_IN = re.compile(r"\b(?:city|town|capital|port|municipality|village)\b.* in ([A-Z][a-z]+)$")
_POOLS = {
    "bridge_fact": "bridge_fact_2",
    "bridge_title": "bridge_title_2",
    "compare_same": "compare_same_2",
    "compare_kind": "compare_kind_2",
    "title": "title_clause",
    "year_gap": "year",
}


@lru_cache(maxsize=1)
def _corpus() -> tuple[Synthesizer, dict[str, str], list[Article]]:
    """The question synthesizer's corpus analysis (no search is run), clean demonyms, places whose country is known."""
    s = Synthesizer(None, seed=0)  # type: ignore[arg-type]
    nats = {t: n for t, n in s.nats.items() if n not in _NOT_DEMONYMS}
    places = [
        a
        for a in s.articles
        if (m := _COUNTRY_IN.search(a.description))
        and "country" in getattr(s.by_name.get(m.group(1)), "description", "").lower()
    ]
    return s, nats, places


def make_failure(qtype: str, rng: random.Random) -> tuple[str, str, str, str | None, list[str]] | None:
    """(question, gold, failure mode, solver's answer, its searches); None if this draw does not fit. The
    searches and answer show the mode as a rollout would (the question pasted as a query, a surname that
    finds a namesake, one search on a two-hop question, the bridge entity as the answer, ...)."""
    s, nats, places = _corpus()
    a = rng.choice(places if qtype == "location" else s.pools[_POOLS.get(qtype, qtype)])
    if qtype in ("nationality", "compare_same") and a.title not in nats:
        return None
    kind = "title" if qtype == "bridge_title" else qtype
    drawn = _FAILURES[kind](_Draw(s, nats, places, a, rng, qtype))
    if drawn is None:
        return None
    q, gold, wrong, modes = drawn
    # every question can be pasted whole, and a small policy often pastes it again
    modes["copied"] = (rng.choice([None, wrong]), [q, q.rstrip("?"), q.lower()][: rng.choice([1, 1, 2, 3])])
    mode = rng.choice(sorted(modes))
    return (q, gold, mode, *modes[mode])


# a question's draw: (question, gold, what a pasted-question search ends in besides no answer, failure mode ->
# (the solver's answer, its searches)), or None when the drawn article does not fit
Failure = tuple[str, str, str | None, dict[str, tuple[str | None, list[str]]]] | None


@dataclass
class _Draw:
    """What one question type's failure is drawn from: the synthesizer, nationalities, places, the article."""

    s: Any
    nats: dict[str, str]
    places: list[Any]
    a: Any
    rng: random.Random
    qtype: str

    def other_nat(self, gold: str) -> str:
        return self.rng.choice(sorted(set(self.nats.values()) - {gold}))


def _nationality(d: _Draw) -> Failure:
    a, rng, modes = d.a, d.rng, {}
    gold, wrong = d.nats[a.title], d.other_nat(d.nats[a.title])
    q = rng.choice([f"What nationality was {a.name}?", f"What is {a.name}'s nationality?"])
    if " " in a.name:
        modes["ambiguous"] = (wrong, [a.name.split()[-1]])
    job = re.sub(r"\(.*|\b[A-Z]\S*", "", a.description).strip(" ,-")  # "American author (..)" -> author
    if job and len(job.split()) <= 4:
        modes["wrong_type"] = (job, [a.name])
    return q, gold, wrong, modes


def _creator(d: _Draw) -> Failure:
    a = d.a
    what, verb, gold = d.s.creators[a.title]
    q = f"Who {verb} {a.name}?" if verb != "created" else f"Who created the {what.lower()} {a.name}?"
    return q, gold, None, {"no_answer": (None, [a.name, f"{a.name} {what.lower()}"])}


def _year(d: _Draw) -> Failure:
    a, rng = d.a, d.rng
    verb, gold = d.s.years[a.title]
    q, wrong = f"In what year was {a.name} {verb}?", str(int(gold) + rng.choice([-20, -2, 1, 5]))
    modes = {"date_confusion": (wrong, [a.name, f"{a.name} {verb}"][: rng.randint(1, 2)])}
    modes["no_answer"] = (None, [f"{a.name} {verb} year", f"{a.name} {verb} year?"])
    return q, gold, wrong, modes


def _bridge_fact(d: _Draw) -> Failure:
    a = d.a
    _, verb, maker = d.s.creators[a.title]
    gold = d.nats.get(d.s.person(maker).title)
    if gold is None:
        return None
    q = f"What nationality was the person who {verb} {a.name}?"
    return q, gold, None, {"bridge_answer": (maker, [a.name]), "one_search": (d.other_nat(gold), [a.name])}


def _title(d: _Draw) -> Failure:
    """``title`` (the article from its first sentence) and ``bridge_title`` (the entity it names hidden)."""
    a, s, modes = d.a, d.s, {}
    c, b = s.clauses[a.title], s.bridge(a)
    gold, who, wrong = a.name, "Who" if a.topic == "People" else "What", None
    if d.qtype == "title":
        q = f"{who} {c.verb} {c.phrase()}?"
        modes["no_answer"] = (None, [c.predicate, c.predicate + "?"])
        if b is not None:  # answered with the entity the clue names, not the one it describes
            modes["related_entity"] = (b.name, [" ".join(c.predicate.split()[:8])])
    elif b is None or (hidden := s.hide(a, b)) is None:
        return None
    else:
        q, wrong = f"{who} {c.verb} {c.det} {hidden[1]}?", b.name
        modes["bridge_answer"] = (b.name, [clue(s.clauses[b.title].predicate) or hidden[0]])
    return q, gold, wrong, modes


def _compare_same(d: _Draw) -> Failure:
    a, rng, nats = d.a, d.rng, d.nats
    b = rng.choice(d.s.pools["compare_same_2"])
    if b.name == a.name or b.title not in nats:
        return None
    gold = "yes" if nats[a.title] == nats[b.title] else "no"
    q, wrong = f"Were {a.name} and {b.name} of the same nationality?", "no" if gold == "yes" else "yes"
    return q, gold, wrong, {"one_side": (wrong, [rng.choice([a.name, b.name])])}


def _compare_kind(d: _Draw) -> Failure:
    a, rng = d.a, d.rng
    head, b = d.s.kinds[a.title], rng.choice(d.s.articles)
    if b.name == a.name or head in (b.description + b.text[:400]).lower():
        return None
    first, second = (a, b) if rng.random() < 0.5 else (b, a)
    gold, wrong = a.name, b.name
    q = f"Which is {'an' if head[0] in 'aeiou' else 'a'} {head}, {first.name} or {second.name}?"
    return q, gold, wrong, {"one_side": (b.name, [b.name])}


def _year_gap(d: _Draw) -> Failure:
    a, rng, s = d.a, d.rng, d.s
    b = rng.choice(s.pools["year"])
    (va, ya), (vb, yb) = s.years[a.title], s.years[b.title]
    if b.name == a.name or ya == yb:
        return None
    gold = str(abs(int(ya) - int(yb)))
    q = f"How many years passed between when {a.name} was {va} and when {b.name} was {vb}?"
    modes = {"number_confusion": (rng.choice([ya, yb]), [a.name, b.name]), "one_search": (None, [a.name])}
    return q, gold, None, modes


def _location(d: _Draw) -> Failure:
    a, rng, places = d.a, d.rng, d.places
    gold = _COUNTRY_IN.search(a.description).group(1)
    q = rng.choice([f"In which country is {a.name}?", f"Which country is {a.name} in?"])
    same = [p.name for p in places if p.name != a.name and p.description.endswith(gold)]
    return (
        q,
        gold,
        None,
        {"wrong_type": (rng.choice(same or [p.name for p in places if p is not a]), [a.name])},
    )


_FAILURES = {
    "nationality": _nationality,
    "creator": _creator,
    "year": _year,
    "bridge_fact": _bridge_fact,
    "title": _title,
    "compare_same": _compare_same,
    "compare_kind": _compare_kind,
    "year_gap": _year_gap,
    "location": _location,
}
