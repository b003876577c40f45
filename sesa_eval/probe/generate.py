"""Generate the probe set: ``python -m sesa_eval.probe.generate --out sesa_eval/data/probe-v1.jsonl``.

Questions over held-out articles only (``sesa_graph.corpus.heldout``), 1-3 hops, each answer readable in the
answer-bearing article's first ``DOC_CHARS`` characters. Deterministic: the same corpus and split give
the same file, byte for byte. "The start of the summary" in a question is that cut.

The forms (``FORMS``; docs/PROBE.md has examples) -- "seen" marks a form whose question pattern is one
the warm-up trains (``training.questions.synth.DEFAULT_MIX``), so seen and unseen forms can be scored apart:

- 1 hop: ``h1_desc_name`` (name from the Wikidata description; seen: ``title_desc``), ``h1_clause_name``
  (name from the first sentence; seen: ``title_clause``, ``propose_1``), ``h1_nationality`` (seen:
  ``nationality``), ``h1_named`` (which <noun> the summary of A names; unseen);
- 2 hops: ``h2_bridge`` (the first sentence of A with the entity B it names replaced by B's description;
  seen: ``bridge_title_2``, ``propose_2``), ``h2_chain`` (the <noun> named by the <noun> named by A;
  unseen), ``h2_shared`` (the <noun> both A's and B's summaries name; unseen);
- 3 hops: ``h3_chain`` (three links of ``h2_chain``; unseen), ``h3_shared_chain`` (the <noun> named by
  both B and the <noun> A names; unseen).
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sesa_eval.probe import GENERATOR
from sesa_eval.probe.facts import Facts, corpus_facts, held_out_facts, readable
from sesa_graph.corpus.heldout import SPLIT_VERSION, is_held_out
from sesa_graph.scoring import contains_answer, normalize_answer

# form -> (hops, seen, the warm-up kinds it overlaps)
FORMS: dict[str, tuple[int, bool, tuple[str, ...]]] = {
    "h1_desc_name": (1, True, ("title_desc",)),
    "h1_clause_name": (1, True, ("title_clause", "propose_1")),
    "h1_nationality": (1, True, ("nationality",)),
    "h1_named": (1, False, ()),
    "h2_bridge": (2, True, ("bridge_title_2", "propose_2")),
    "h2_chain": (2, False, ()),
    "h2_shared": (2, False, ()),
    "h3_chain": (3, False, ()),
    "h3_shared_chain": (3, False, ()),
}
QUOTA = {1: 110, 2: 110, 3: 110}  # questions per hop count, split evenly over its forms
MAX_PER_ANSWER = 2  # one answer string may close at most this many questions (no "Europe" prior)
MAX_PER_ARTICLE = 4  # one article may appear in at most this many questions
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / f"{GENERATOR}.jsonl"


@dataclass(frozen=True)
class Probe:
    form: str
    question: str
    golds: tuple[str, ...]
    articles: tuple[str, ...]  # titles, the answer-bearing one last
    anchors: tuple[str, ...] = ()  # the articles the question names; the others it must not name


def lower_first(text: str) -> str:
    """``Capital of Hubei`` -> ``capital of Hubei``, but ``Rome-Gaul wars`` keeps its proper noun: only a
    first word some description also spells in lower case is lowered."""
    first = text.split(" ", 1)[0]
    return text[0].lower() + text[1:] if first.lower() in _common_words() else text


@lru_cache(maxsize=1)
def _common_words() -> frozenset[str]:
    return frozenset(
        w
        for f in corpus_facts().values()
        for w in (f.article.description + " " + f.article.text).split()
        if w.islower()
    )


def _named(x: Facts, held: dict[str, Facts]) -> list[Facts]:
    """The held-out articles ``x``'s opening names that no other article it names shares a noun with,
    so "the <noun> named at the start of x's summary" means one of them."""
    facts = corpus_facts()
    nouns = [facts[t].noun for t in x.named]
    return [held[t] for t, n in zip(x.named, nouns) if t in held and n and nouns.count(n) == 1]


def _at_start(x: str) -> str:
    return f"named at the start of the Wikipedia summary of {x}"


def _link(f: Facts, x: str) -> str:
    """A referring phrase for ``f`` reached from the subject ``x``."""
    return f"the {f.noun} named at the start of the summary of {x}"


_UNIQUE = re.compile(
    r"\d|\b(?:\w*most|only|sole|first|second|third|fourth|fifth|largest|longest|highest|oldest|biggest|"
    r"smallest|deepest|tallest|earliest|greatest|busiest|richest|hottest|coldest|driest|youngest)\b"
)


def specific_clause(det: str, pred: str) -> bool:
    """A first-sentence predicate that fits one thing: a definite description ("the capital of Iraq"), or a
    year, a superlative or an ordinal ("a 1941 film", "the largest ..."); "a landlocked country in
    Southeast Europe" fits several and is dropped."""
    if len(pred.split()) < 3 or not re.search(r"[A-Z]", pred):
        return False
    return det == "the" or pred.lower().startswith("capital") or bool(_UNIQUE.search(pred))


def candidates() -> Iterator[Probe]:
    held = held_out_facts()
    for a in held.values():
        yield from _one_hop(a, held)
        yield from _two_hops(a, held)
        yield from _three_hops(a, held)


def cut_mid_number(a: Facts) -> bool:
    """The first clause stopped at a decimal point ("rising 4,807" of "4,807.9 m")."""
    pred = a.clause[2] if a.clause else ""
    i = a.article.text.find(pred)
    return i >= 0 and bool(re.match(r"\.\d", a.article.text[i + len(pred) : i + len(pred) + 2]))


def _one_hop(a: Facts, held: dict[str, Facts]) -> Iterator[Probe]:
    name = a.name
    if cut_mid_number(a):
        a.clause = None
    if a.description and specific_clause("a", a.description):
        yield Probe(
            "h1_desc_name", f"Give the name of the {lower_first(a.description)}.", (name,), (a.title,)
        )
    if a.clause and a.noun and specific_clause(a.clause[1], a.clause[2]) and a.clause[0] in ("is", "was"):
        verb, det, pred = a.clause
        rel = "who" if a.noun == "person" else "that"
        yield Probe("h1_clause_name", f"Name the {a.noun} {rel} {verb} {det} {pred}.", (name,), (a.title,))
    if a.nationality:
        q = f"Which nationality did {name} have?"
        yield Probe("h1_nationality", q, (a.nationality,), (a.title,), (a.title,))
    for z in _named(a, held):
        yield Probe("h1_named", f"Which {z.noun} is {_at_start(name)}?", (z.name,), (a.title,), (a.title,))


def _two_hops(a: Facts, held: dict[str, Facts]) -> Iterator[Probe]:
    for y in _named(a, held):
        for z in _named(y, held):
            if z.title != a.title and z.title not in a.named:
                q = f"Which {z.noun} is {_at_start(_link(y, a.name))}?"
                yield Probe("h2_chain", q, (z.name,), (a.title, y.title), (a.title,))
    if a.clause and a.noun and a.clause[0] in ("is", "was"):
        verb, det, pred = a.clause
        for b in _named(a, held):
            if not b.description or contains_answer(b.description, [a.name]):
                continue
            hidden, n = re.subn(
                rf"\b(?:(?:the|a|an) )?{re.escape(b.name)}(?=$|[\s,])",
                f"the {lower_first(b.description)}",
                pred,
            )
            if n == 1 and specific_clause(det, pred):
                rel = "who" if a.noun == "person" else "that"
                q = f"Name the {a.noun} {rel} {verb} {det} {hidden}."
                yield Probe("h2_bridge", q, (a.name,), (b.title, a.title))
    for b in held.values():
        if b.title <= a.title or b.title in a.named or a.title in b.named:
            continue
        common = [t for t in a.named if t in b.named]
        if len(common) == 1 and common[0] in held and corpus_facts()[common[0]].noun:
            z = held[common[0]]
            q = f"Which {z.noun} is named at the start of the Wikipedia summaries of both {a.name} and {b.name}?"
            yield Probe("h2_shared", q, (z.name,), (a.title, b.title), (a.title, b.title))


def _three_hops(a: Facts, held: dict[str, Facts]) -> Iterator[Probe]:
    for y in _named(a, held):
        for z in _named(y, held):
            if z.title == a.title or z.title in a.named:
                continue
            for w in _named(z, held):
                if w.title in (a.title, y.title) or w.title in a.named or w.title in y.named:
                    continue
                q = f"Which {w.noun} is {_at_start(_link(z, _link(y, a.name)))}?"
                yield Probe("h3_chain", q, (w.name,), (a.title, y.title, z.title), (a.title,))
        for b in held.values():
            if (
                b.title in (a.title, y.title)
                or b.title in a.named
                or b.title in y.named
                or y.title in b.named
            ):
                continue
            common = [t for t in y.named if t in b.named]
            if len(common) != 1 or common[0] not in held or common[0] in a.named or common[0] == a.title:
                continue
            w = held[common[0]]
            if not w.noun:
                continue
            q = (
                f"Which {w.noun} is named at the start of the Wikipedia summaries of both {b.name} "
                f"and {_link(y, a.name)}?"
            )
            yield Probe("h3_shared_chain", q, (w.name,), (a.title, y.title, b.title), (a.title, b.title))


def problem(p: Probe) -> str | None:
    """Why ``p`` is not a fair probe question (None: it is)."""
    facts = corpus_facts()
    if not all(is_held_out(t) for t in p.articles) or len(set(p.articles)) != len(p.articles):
        return "an article not held out, or used twice"
    if not any(readable(facts[p.articles[-1]].article, g) for g in p.golds):
        return "the answer is not in the answer-bearing article's cut"
    if contains_answer(p.question, list(p.golds)) or any(
        len(w) >= 4 and w[0].isupper() and re.search(rf"(?<!\w){re.escape(w)}(?!\w)", p.question)
        for g in p.golds
        for w in g.split()
    ):
        return "the answer, or a name in it, is in the question"
    if any(len(normalize_answer(g)) < 4 for g in p.golds):
        return "an answer too short to be unambiguous"
    if any(normalize_answer(g) in trained_names() for g in p.golds):
        return "the answer is the name of an article the trainer may draw"
    # a hop the question names outright is a hop it skips
    if any(contains_answer(p.question, [facts[t].name]) for t in p.articles if t not in p.anchors):
        return "a hop's article is named in the question"
    return None


_TRAINED: set[str] = set()


def trained_names() -> set[str]:
    if not _TRAINED:
        _TRAINED.update(normalize_answer(f.name) for t, f in corpus_facts().items() if not is_held_out(t))
    return _TRAINED


def select(probes: list[Probe]) -> list[Probe]:
    """Up to ``QUOTA`` questions per hop count, the forms taking turns, no answer or article overused."""
    rng = random.Random(GENERATOR)
    by_form: dict[str, list[Probe]] = {f: [] for f in FORMS}
    seen_q: set[str] = set()
    for p in probes:
        if p.question not in seen_q and problem(p) is None:
            seen_q.add(p.question)
            by_form[p.form].append(p)
    for lst in by_form.values():
        lst.sort(key=lambda p: (p.question, p.articles))
        rng.shuffle(lst)
    answers: dict[str, int] = {}
    used: dict[str, int] = {}
    out: list[Probe] = []
    for hops, quota in sorted(QUOTA.items(), reverse=True):  # the scarce long chains choose first
        forms = [f for f, (h, _, _) in FORMS.items() if h == hops]
        cursor = dict.fromkeys(forms, 0)
        taken = 0
        while taken < quota and any(cursor[f] < len(by_form[f]) for f in forms):
            for f in forms:
                while cursor[f] < len(by_form[f]):
                    p = by_form[f][cursor[f]]
                    cursor[f] += 1
                    key = normalize_answer(p.golds[0])
                    if answers.get(key, 0) >= MAX_PER_ANSWER or any(
                        used.get(t, 0) >= MAX_PER_ARTICLE for t in p.articles
                    ):
                        continue
                    answers[key] = answers.get(key, 0) + 1
                    for t in p.articles:
                        used[t] = used.get(t, 0) + 1
                    out.append(p)
                    taken += 1
                    break
                if taken >= quota:
                    break
    return sorted(out, key=lambda p: (FORMS[p.form][0], list(FORMS).index(p.form), p.question))


def rows() -> list[dict]:
    out = []
    for i, p in enumerate(select(list(candidates())), 1):
        hops, seen, _ = FORMS[p.form]
        out.append(
            {
                "id": f"probe-{i:04d}",
                "question": p.question,
                "golden_answers": list(dict.fromkeys(p.golds)),
                "hops": hops,
                "form": p.form,
                "seen_form": seen,
                "articles": list(p.articles),
                "generator": GENERATOR,
                "split": SPLIT_VERSION,
            }
        )
    return out


def render(rs: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    rs = rows()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rs), encoding="utf-8")
    counts: dict[str, int] = {}
    for r in rs:
        counts[r["form"]] = counts.get(r["form"], 0) + 1
    print(f"{args.out}: {len(rs)} questions; by form: {counts}")


if __name__ == "__main__":
    main()
