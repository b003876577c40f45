"""The solver's example kinds: 1-hop (title from a first sentence or a description; nationality,
creator, year) and 2-hop (bridges, comparisons, a failed search then a different query, two failed
searches then an answer). A mixin of :class:`training.questions.synth.Synthesizer`, whose pools, parsed
facts and ``_solver`` builder these methods use."""

from __future__ import annotations

import re

from sesa_graph.corpus.articles import Article
from sesa_graph.corpus.facts import (
    clip_words,
    clue,
    lower_first,
    mentions,
    misspell,
    question_word,
    words,
)
from training.questions.examples import Miss, WarmupExample


class SolverKinds:
    """One method per solver kind of ``DEFAULT_MIX``: an article in, a grounded example (or None) out."""

    # ---- solver kinds -------------------------------------------------------------------------------
    def title_clause(self, a: Article) -> WarmupExample | None:
        c = self.clauses[a.title]
        question = f"{question_word(a)} {c.verb} {c.phrase()}?"
        query = clip_words(c.predicate, 10)
        return self._solver(
            "title_clause",
            question,
            a.name,
            [
                (f"I need to find what is described as {clip_words(c.predicate, 8)}.", query, a.title),
            ],
            f"Doc {{rank}} is about {a.name}, which {c.verb} {c.phrase()}.",
        )

    def title_desc(self, a: Article) -> WarmupExample | None:
        d = lower_first(a.description)
        question = self.rng.choice(
            [f"What is the name of the {d}?", f"Which {d} is meant here?", f"Name the {d}."]
        )
        return self._solver(
            "title_desc",
            question,
            a.name,
            [
                (f"I should search for the {d}.", a.description, a.title),
            ],
            f"Doc {{rank}} ({a.name}) matches the {d}.",
        )

    def nationality(self, a: Article) -> WarmupExample | None:
        nat = self.nats[a.title]
        verb = "was" if re.search(r"\bwas\b", a.text[:200]) else "is"
        question = self.rng.choice(
            [f"What nationality {verb} {a.name}?", f"What is the nationality of {a.name}?"]
        )
        return self._solver(
            "nationality",
            question,
            nat,
            [
                (f"I need to look up {a.name}.", a.name, a.title),
            ],
            f"Doc {{rank}} says {a.name} {verb} {nat}.",
        )

    def creator(self, a: Article) -> WarmupExample | None:
        what, verb, who = self.creators[a.title]
        question = (
            f"Who {verb} {a.name}?" if verb != "created" else f"Who created the {lower_first(what)} {a.name}?"
        )
        return self._solver(
            "creator",
            question,
            who,
            [
                (f"I need to find out about {a.name}.", a.name, a.title),
            ],
            f"Doc {{rank}} says {a.name} is a {lower_first(what)} by {who}.",
        )

    def year(self, a: Article) -> WarmupExample | None:
        verb, year = self.years[a.title]
        question = (
            f"In what year was {a.name} {verb}?"
            if verb != "fought"
            else f"In what year was the {a.name} fought?"
        )
        return self._solver(
            "year",
            question,
            year,
            [
                (f"I need the year {a.name} was {verb}.", a.name, a.title),
            ],
            f"Doc {{rank}} says {a.name} was {verb} in {year}.",
        )

    def bridge_fact_2(self, a: Article) -> WarmupExample | None:
        _what, verb, who = self.creators[a.title]
        b = self.person(who)
        if b is None:
            return None
        nat = self.nats[b.title]
        question = f"What nationality was the person who {verb} {a.name}?"
        return self._solver(
            "bridge_fact_2",
            question,
            nat,
            [
                (f"First I need to find who {verb} {a.name}.", a.name, a.title),
                (
                    f"Doc {{prev}} says {a.name} is by {who}. Now I need the nationality of {who}.",
                    who,
                    b.title,
                ),
            ],
            f"Doc {{rank}} says {who} was {nat}.",
        )

    def bridge_title_2(self, a: Article) -> WarmupExample | None:
        c, b = self.clauses[a.title], self.bridge(a)
        if b is None:
            return None
        hidden = self.hide(a, b)
        if hidden is None:
            return None
        inner, pred = hidden
        cb = self.clauses[b.title]
        short = clue(cb.predicate)
        question = f"{question_word(a)} {c.verb} {c.det} {pred}?"
        if mentions(question, a.name) or mentions(question, b.name):
            return None
        return self._solver(
            "bridge_title_2",
            question,
            a.name,
            [
                (f"First I need to find {inner}.", short, b.title),
                (
                    f"Doc {{prev}} says that is {b.name}. Now I search for {clip_words(c.predicate, 8)}.",
                    clip_words(c.predicate, 12),
                    a.title,
                ),
            ],
            f"Doc {{rank}} is about {a.name}, which {c.verb} {c.phrase()}.",
        )

    def compare_same_2(self, a: Article) -> WarmupExample | None:
        b = self.rng.choice(self.pools["compare_same_2"])
        if b.title == a.title or b.name == a.name:
            return None
        na, nb = self.nats[a.title], self.nats[b.title]
        same = "yes" if na == nb else "no"
        question = f"Were {a.name} and {b.name} of the same nationality?"
        return self._solver(
            "compare_same_2",
            question,
            same,
            [
                (f"I need the nationality of {a.name} first.", a.name, a.title),
                (f"Doc {{prev}} says {a.name} was {na}. Now I need {b.name}.", b.name, b.title),
            ],
            f"{a.name} was {na} and {b.name} was {nb}, so the answer is {same}.",
        )

    def compare_kind_2(self, a: Article) -> WarmupExample | None:
        head = self.kinds[a.title]
        b = self.rng.choice(self.articles)
        if (
            b.title == a.title
            or b.name == a.name
            or head in (b.description + " " + b.text[: self.doc_chars]).lower()
        ):
            return None
        first, second = (a, b) if self.rng.random() < 0.5 else (b, a)
        art = "an" if head[0] in "aeiou" else "a"
        question = f"Which is {art} {head}, {first.name} or {second.name}?"
        other = "" if second is a else f" Doc {{rank}} shows {second.name} is not {art} {head}."
        verdict = f"{a.name} is {art} {head}."
        return self._solver(
            "compare_kind_2",
            question,
            a.name,
            [
                (f"I need to check what {first.name} is.", first.name, first.title),
                (f"Now I need to check what {second.name} is.", second.name, second.title),
            ],
            (other + " " + verdict).strip() if other else verdict,
        )

    def _fact(self, a: Article) -> tuple[str, str, str, str] | None:
        """(question, answer, final think, vague query) for a nationality or creator fact about ``a``."""
        name = a.name
        if a.title in self.nats:
            nat = self.nats[a.title]
            be = "was" if re.search(r"\bwas\b", a.text[:200]) else "is"
            vague = " ".join(
                w for w in re.sub(r"\s*\([^)]*\)", "", a.description).split() if w.lower() != nat.lower()
            )
            return f"What nationality {be} {name}?", nat, f"Doc {{rank}} says {name} {be} {nat}.", vague
        if a.title in self.creators:
            what, verb, who = self.creators[a.title]
            return (
                f"Who {verb} {name}?",
                who,
                f"Doc {{rank}} says {name} is a {lower_first(what)} by {who}.",
                what,
            )
        return None

    def _misses(self, a: Article, vague: str, answer: str) -> tuple[str | None, str | None]:
        """Two bad queries for ``a``: its name misspelled (no results) and a vague description (results
        that are other articles); None where not possible."""
        spelled = misspell(a.name, self.rng)
        if spelled is not None and self.search(spelled):
            spelled = None
        vague = vague.strip()
        if (
            len(words(vague)) < 2
            or mentions(vague, a.name)
            or mentions(vague, answer)
            or not self.search(vague)
            or any(d.title == a.title for d in self.search(vague))
        ):
            vague = None
        return spelled, vague

    def retry_2(self, a: Article) -> WarmupExample | None:
        """A first search that fails (a misspelled name: no results; or a vague query: other articles),
        then a different query that finds the article, then the answer. The failed turn is not trained."""
        fact = self._fact(a)
        if fact is None:
            return None
        question, answer, final_think, vague = fact
        spelled, vague = self._misses(a, vague, answer)
        if spelled and (vague is None or self.rng.random() < 0.5):
            first, query = f"I need to look up {spelled}.", spelled
            second = f"No results. The name may be spelled differently; I will search for {a.name} as in the question."
        elif vague:
            first, query = f"I will search for {vague}.", vague
            second = f"The documents are not about {a.name}. I will search for {a.name} itself."
        else:
            return None
        return self._solver(
            "retry_2",
            question,
            answer,
            [
                (first, query, Miss(a.title)),
                (second, a.name, a.title),
            ],
            final_think,
        )

    def giveup_2(self, a: Article) -> WarmupExample | None:
        """Two failed searches with different queries, then an answer from what the model knows: after two
        misses, answer instead of searching on (the failed turns are not trained, the answer is)."""
        fact = self._fact(a)
        if fact is None:
            return None
        question, answer, _, vague = fact
        spelled, vague = self._misses(a, vague, answer)
        if not (spelled and vague):
            return None
        steps = [
            (f"I need to look up {spelled}.", spelled, Miss(a.title)),
            (f"I will search for {vague}.", vague, Miss(a.title)),
        ]
        if self.rng.random() < 0.5:
            steps.reverse()
        return self._solver(
            "giveup_2",
            question,
            answer,
            steps,
            f"Two searches found nothing about {a.name}. I will answer from what I know.",
        )
