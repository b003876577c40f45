"""The automatic checks of a probe file at a cut (``python -m sesa_eval.probe.audit FILE [--doc-chars N]``):
the counts issue 32's audit gave for v1, re-run on any version.

- **unreadable**: some hop cannot be read at the cut: the next article's name (or the gold) is not in the
  first ``doc_chars`` characters of the article that should show it;
- **ambiguous**: a "which <kind>" (or "the <kind> named ...") step whose opening also shows another name
  that may be of that kind's family (:func:`sesa_eval.probe.facts_v2.rivals`, names read by
  :mod:`sesa_eval.probe.names`: no joins across "and" or sentence ends);
- **wrong**: the gold's article is not of the asked kind's family, or is a film, novel, band ... the opening
  does not call one (another sense of the name).

Only the forms that walk openings (``h1_named``, ``h2_chain``, ``h2_shared``, ``h3_chain``,
``h3_shared_chain``, ``h2_creator_nationality``, ``h2_bridge``) have hops to check; the clue forms are
checked for readability of the gold alone.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from itertools import pairwise
from pathlib import Path

from sesa_eval.probe.facts_v2 import FactsV2, corpus_facts_v2, family
from sesa_eval.probe.names import WORK_KINDS, mentions, says_kind, senses
from sesa_graph.scoring import contains_answer

_KIND = re.compile(r"\bthe (\w+) named at the start|^Which (\w+) is named")


def _visible(f: FactsV2, name: str, cut: int) -> bool:
    return contains_answer(f.article.text[:cut], [name])


def _steps(row: dict) -> list[tuple[str, str]]:
    """(article title, what its opening must show) per hop; a title stands for its article's name."""
    arts, gold, form = row["articles"], "=" + row["golden_answers"][0], row["form"]
    if form in ("h2_chain", "h3_chain"):
        return [*pairwise(arts), (arts[-1], gold)]
    if form == "h2_shared":
        return [(arts[0], gold), (arts[1], gold)]
    if form == "h3_shared_chain":
        return [(arts[0], arts[1]), (arts[1], gold), (arts[2], gold)]
    if form in ("h2_bridge",):
        return [(arts[1], arts[0]), (arts[1], gold)]
    if form == "h2_creator_nationality":
        return [(arts[0], arts[1]), (arts[1], gold)]
    return [(arts[-1], gold)]


def _answer_article(row: dict, facts: dict[str, FactsV2]) -> FactsV2 | None:
    ts = [t for t in senses(row["golden_answers"][0]) if t in facts]
    return facts[ts[0]] if len(ts) == 1 else None


def check(row: dict, cut: int) -> list[str]:
    """The audit's findings for one probe row at ``cut`` ("unreadable", "ambiguous", "wrong")."""
    facts = corpus_facts_v2(cut)
    if any(t not in facts for t in row["articles"]):
        return ["unreadable"]
    out = []
    for src, shows in _steps(row):
        name = shows[1:] if shows.startswith("=") else facts[shows].name
        golds = row["golden_answers"] if shows.startswith("=") else [name]
        if not any(_visible(facts[src], g, cut) for g in golds):
            out.append("unreadable")
            break
    kinds = [k for m in _KIND.finditer(row["question"]) for k in m.groups() if k]
    if not kinds:
        return out
    answer = _answer_article(row, facts)
    if answer is None or not family(answer.noun) & family(kinds[0]):
        out.append("wrong")
    elif answer.noun in WORK_KINDS:
        src = facts[_steps(row)[-1][0]]
        if not any(says_kind(src.article.text, m, answer.noun) for m in mentions(src.article.text, cut)):
            out.append("wrong")
    if answer is not None and _rivalled(row, answer, kinds[0], facts):
        out.append("ambiguous")
    return out


def _rivalled(row: dict, answer: FactsV2, kind: str, facts: dict[str, FactsV2]) -> bool:
    """Another name in the gold-showing opening(s) may be of the asked kind (in all of them, for
    "both")."""
    fam = family(kind)
    mine = {answer.name, answer.title, *row["golden_answers"]}
    sources = [src for src, shows in _steps(row) if shows.startswith("=")]
    rival_sets = [
        {
            s
            for s, ks in facts[src].kinds_named.items()
            if ks & fam and s not in mine and s.removeprefix("The ") not in mine
        }
        for src in sources
    ]
    return bool(set.intersection(*rival_sets)) if rival_sets else False


def audit(rows: list[dict], cut: int) -> dict:
    """Counts of each finding, overall and on the layout forms, and the flagged ids."""
    flagged = {r["id"]: check(r, cut) for r in rows}
    counts = Counter(k for ks in flagged.values() for k in set(ks))
    return {
        "questions": len(rows),
        "doc_chars": cut,
        "any": sum(bool(ks) for ks in flagged.values()),
        **{k: counts.get(k, 0) for k in ("unreadable", "ambiguous", "wrong")},
        "flagged": {i: ks for i, ks in flagged.items() if ks},
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--doc-chars", type=int, default=240)
    a = ap.parse_args(argv)
    rows = [json.loads(x) for x in a.file.read_text("utf-8").splitlines() if x.strip()]
    rep = audit(rows, a.doc_chars)
    print(json.dumps({k: v for k, v in rep.items() if k != "flagged"}))
    for i, ks in list(rep["flagged"].items())[:15]:
        print(i, ks)


if __name__ == "__main__":
    main()
