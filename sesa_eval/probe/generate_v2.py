"""Generate probe v2: ``python -m sesa_eval.probe.generate_v2 [--doc-chars 240] [--out ...]``.

v1 (``sesa_eval.probe.generate``, ``probe-v1.jsonl``) stays frozen for comparison. v2 answers the audit of
v1 (issue 32):

- names are read by :mod:`sesa_eval.probe.names` (no name across "and" or a sentence end) and every
  link, clue and answer is checked at ``doc_chars``, the cut the eval shows (the default run's
  ``solver.doc_chars``, 240), which the file records and ``sesa eval`` checks;
- "which <kind>" is asked only when no other name the opening shows may be of that kind's family
  (:func:`sesa_eval.probe.facts_v2.rivals`), and no link goes to another sense of a name;
- gold answers carry the aliases the answer's opening gives;
- the forms that ask what a summary names at its start test the corpus's layout more than search: they are
  marked ``layout`` and scored as their own slice, apart from the headline;
- a question any of the audit's checks flags (:mod:`sesa_eval.probe.audit`) is dropped;
- each question records its ``cluster``: questions that share an article or an answer, transitively, so
  the cluster bootstrap (``sesa_eval.paired``) can resample them together.

Deterministic: the same corpus, split, cut and quotas give the same file byte for byte.
"""

from __future__ import annotations

import argparse
import random
import re
from collections.abc import Iterator
from pathlib import Path

from sesa_eval.probe import GENERATOR_V2
from sesa_eval.probe.audit import check
from sesa_eval.probe.facts_v2 import FactsV2, corpus_facts_v2, rivals
from sesa_eval.probe.generate import (
    Probe,
    cut_mid_number,
    lower_first,
    render,
    specific_clause,
    trained_names,
)
from sesa_eval.probe.names import senses
from sesa_eval.resample import connected
from sesa_graph.corpus.facts import creator, year_event
from sesa_graph.corpus.heldout import SPLIT_VERSION, is_held_out
from sesa_graph.scoring import contains_answer, normalize_answer

# form -> (hops, seen by the warm-up, layout-bound)
FORMS: dict[str, tuple[int, bool, bool]] = {
    "h1_desc_name": (1, True, False),
    "h1_clause_name": (1, True, False),
    "h1_nationality": (1, True, False),
    "h1_year": (1, True, False),
    "h2_bridge": (2, True, False),
    "h2_creator_nationality": (2, False, False),
    "h1_named": (1, False, True),
    "h2_chain": (2, False, True),
    "h2_shared": (2, False, True),
    "h3_chain": (3, False, True),
    "h3_shared_chain": (3, False, True),
}
# most questions of a form: the headline forms take all they have, the layout slice stays a minority
QUOTA = {
    "h1_desc_name": 400,
    "h1_clause_name": 400,
    "h1_nationality": 400,
    "h1_year": 400,
    "h2_bridge": 400,
    "h2_creator_nationality": 400,
    "h1_named": 40,
    "h2_chain": 40,
    "h2_shared": 40,
    "h3_chain": 40,
    "h3_shared_chain": 40,
}
MAX_PER_ANSWER = 2
MAX_PER_ARTICLE = 4
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / f"{GENERATOR_V2}.jsonl"


def _at(kind: str, x: str) -> str:
    return f"the {kind} named at the start of the summary of {x}"


def _links(x: FactsV2, held: dict[str, FactsV2]) -> list[FactsV2]:
    """The held-out articles ``x``'s opening names that no other name there may rival in kind."""
    return [held[t] for t in x.named if t in held and held[t].noun and not rivals(x, held[t])]


def _only_a_century(text: str) -> bool:
    """A clue whose only number is a century ("4th-century Christian bishop and theologian") fits many
    things outside the corpus."""
    return bool(re.search(r"\d+(?:st|nd|rd|th)[- ]century", text)) and len(re.findall(r"\d+", text)) == 1


def candidates(cut: int) -> Iterator[Probe]:
    held = {t: f for t, f in corpus_facts_v2(cut).items() if is_held_out(t)}
    for a in held.values():
        yield from _one_hop(a, held, cut)
        yield from _bridges(a, held, cut)
        yield from _chains(a, held)
        yield from _shared(a, held)


def _one_hop(a: FactsV2, held: dict[str, FactsV2], cut: int) -> Iterator[Probe]:
    if cut_mid_number(a):
        a.clause = None
    if a.description and specific_clause("a", a.description) and not _only_a_century(a.description):
        q = f"Give the name of the {lower_first(a.description)}."
        yield Probe("h1_desc_name", q, a.aliases, (a.title,))
    if a.clause and a.noun and specific_clause(a.clause[1], a.clause[2]) and a.clause[0] in ("is", "was"):
        verb, det, pred = a.clause
        rel = "who" if a.noun == "person" else "that"
        yield Probe("h1_clause_name", f"Name the {a.noun} {rel} {verb} {det} {pred}.", a.aliases, (a.title,))
    if a.nationality:
        q = f"Which nationality did {a.name} have?"
        yield Probe("h1_nationality", q, (a.nationality,), (a.title,), (a.title,))
    year = year_event(a.article, cut)
    if year and len(re.findall(rf"\b{year[0]}\b", a.article.text[:cut])) == 1:  # one such event in view
        yield Probe("h1_year", f"In what year was {a.name} {year[0]}?", (year[1],), (a.title,), (a.title,))
    for z in _links(a, held):
        q = f"Which {z.noun} is named at the start of the Wikipedia summary of {a.name}?"
        yield Probe("h1_named", q, z.aliases, (a.title,), (a.title,))


def _bridges(a: FactsV2, held: dict[str, FactsV2], cut: int) -> Iterator[Probe]:
    if a.clause and a.noun and a.clause[0] in ("is", "was"):
        verb, det, pred = a.clause
        for b in (held[t] for t in a.named if t in held):
            if not b.description or contains_answer(b.description, [a.name]):
                continue
            hidden, n = re.subn(
                rf"\b(?:(?:the|a|an) )?{re.escape(b.name)}(?=$|[\s,])",
                f"the {lower_first(b.description)}",
                pred,
            )
            if n == 1 and specific_clause(det, pred):
                rel = "who" if a.noun == "person" else "that"
                yield Probe(
                    "h2_bridge",
                    f"Name the {a.noun} {rel} {verb} {det} {hidden}.",
                    a.aliases,
                    (b.title, a.title),
                )
    made = creator(a.article, cut)
    if made:
        _, verb, who = made
        ts = senses(who)
        if len(ts) == 1 and ts[0] in held and held[ts[0]].nationality and ts[0] in a.named:
            c = held[ts[0]]
            q = f"Which nationality did the person who {verb} {a.name} have?"
            yield Probe("h2_creator_nationality", q, (c.nationality,), (a.title, c.title), (a.title,))


def _chains(a: FactsV2, held: dict[str, FactsV2]) -> Iterator[Probe]:
    for y in _links(a, held):
        for z in _links(y, held):
            if z.title == a.title or z.title in a.named:
                continue
            q = f"Which {z.noun} is named at the start of the Wikipedia summary of {_at(y.noun, a.name)}?"
            yield Probe("h2_chain", q, z.aliases, (a.title, y.title), (a.title,))
            for w in _links(z, held):
                if w.title in (a.title, y.title) or w.title in a.named or w.title in y.named:
                    continue
                q = f"Which {w.noun} is named at the start of the Wikipedia summary of {_at(z.noun, _at(y.noun, a.name))}?"
                yield Probe("h3_chain", q, w.aliases, (a.title, y.title, z.title), (a.title,))


def _common(x: FactsV2, b: FactsV2, held: dict[str, FactsV2]) -> FactsV2 | None:
    """The one held-out article both openings name with no name both show rivalling it in kind."""
    common = [t for t in x.named if t in b.named and t in held and held[t].noun]
    if len(common) != 1:
        return None
    z = held[common[0]]
    return None if set(rivals(x, z)) & set(rivals(b, z)) else z


def _shared(a: FactsV2, held: dict[str, FactsV2]) -> Iterator[Probe]:
    for b in held.values():
        if b.title <= a.title or b.title in a.named or a.title in b.named:
            continue
        z = _common(a, b, held)
        if z is not None:
            q = f"Which {z.noun} is named at the start of the Wikipedia summaries of both {a.name} and {b.name}?"
            yield Probe("h2_shared", q, z.aliases, (a.title, b.title), (a.title, b.title))
    for y in _links(a, held):
        for b in held.values():
            if (
                b.title in (a.title, y.title)
                or b.title in a.named
                or b.title in y.named
                or y.title in b.named
            ):
                continue
            w = _common(y, b, held)
            if w is None or w.title in a.named or w.title == a.title:
                continue
            q = (
                f"Which {w.noun} is named at the start of the Wikipedia summaries of both {b.name} "
                f"and {_at(y.noun, a.name)}?"
            )
            yield Probe("h3_shared_chain", q, w.aliases, (a.title, y.title, b.title), (a.title, b.title))


def problem(p: Probe, cut: int) -> str | None:
    """Why ``p`` is not a fair v2 question at ``cut`` (None: it is)."""
    facts = corpus_facts_v2(cut)
    if not all(is_held_out(t) for t in p.articles) or len(set(p.articles)) != len(p.articles):
        return "an article not held out, or used twice"
    if not contains_answer(facts[p.articles[-1]].article.text[:cut], [p.golds[0]]):
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
        return "an answer is the name of an article the trainer may draw"
    if any(contains_answer(p.question, [facts[t].name]) for t in p.articles if t not in p.anchors):
        return "a hop's article is named in the question"
    return None


def select(probes: list[Probe], cut: int, quota: dict[str, int]) -> list[Probe]:
    """Up to ``quota`` questions per form, the forms taking turns (longest chains first), no answer or
    article overused."""
    rng = random.Random(GENERATOR_V2)
    by_form: dict[str, list[Probe]] = {f: [] for f in FORMS}
    seen_q: set[str] = set()
    for p in probes:
        if p.question not in seen_q and problem(p, cut) is None and not check(_row(p), cut):
            seen_q.add(p.question)
            by_form[p.form].append(p)
    for lst in by_form.values():
        lst.sort(key=lambda p: (p.question, p.articles))
        rng.shuffle(lst)
    answers: dict[str, int] = {}
    used: dict[str, int] = {}
    out: list[Probe] = []
    order = sorted(FORMS, key=lambda f: -FORMS[f][0])
    cursor = dict.fromkeys(FORMS, 0)
    taken = dict.fromkeys(FORMS, 0)
    while any(taken[f] < quota.get(f, 0) and cursor[f] < len(by_form[f]) for f in order):
        for f in order:
            while taken[f] < quota.get(f, 0) and cursor[f] < len(by_form[f]):
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
                taken[f] += 1
                break
    return sorted(out, key=lambda p: (list(FORMS).index(p.form), p.question))


def _row(p: Probe) -> dict:
    """What the audit reads of a question."""
    return {
        "question": p.question,
        "golden_answers": list(p.golds),
        "form": p.form,
        "articles": list(p.articles),
    }


def clusters(probes: list[Probe]) -> list[int]:
    """Per question, its cluster: questions linked by a shared article or answer, transitively."""
    return connected([[f"a:{t}" for t in p.articles] + [f"g:{normalize_answer(p.golds[0])}"] for p in probes])


def default_doc_chars() -> int:
    """The cut every eval of the default run shows: ``solver.doc_chars`` of configs/tiny-cpu.yaml."""
    from sesa_graph.config import load_config

    return load_config().solver.doc_chars


def rows(cut: int | None = None, quota: dict[str, int] | None = None) -> list[dict]:
    cut = cut or default_doc_chars()
    chosen = select(list(candidates(cut)), cut, quota or QUOTA)
    out = []
    for i, (p, c) in enumerate(zip(chosen, clusters(chosen)), 1):
        hops, seen, layout = FORMS[p.form]
        out.append(
            {
                "id": f"p2-{i:04d}",
                "question": p.question,
                "golden_answers": list(dict.fromkeys(p.golds)),
                "hops": hops,
                "form": p.form,
                "seen_form": seen,
                "layout": layout,
                "articles": list(p.articles),
                "cluster": c,
                "doc_chars": cut,
                "generator": GENERATOR_V2,
                "split": SPLIT_VERSION,
            }
        )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--doc-chars", type=int, default=None, help="The cut the evals show (default: the default run's)."
    )
    args = ap.parse_args(argv)
    args.doc_chars = args.doc_chars or default_doc_chars()
    rs = rows(args.doc_chars)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rs), encoding="utf-8")
    counts: dict[str, int] = {}
    for r in rs:
        counts[r["form"]] = counts.get(r["form"], 0) + 1
    print(f"{args.out}: {len(rs)} questions at doc_chars {args.doc_chars}; by form: {counts}")


if __name__ == "__main__":
    main()
