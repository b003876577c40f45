"""SQuAD-style answer matching: normalization, exact match, token F1 and "gold was retrieved".

One deviation from the SQuAD script: punctuation is every Unicode punctuation character, not only
ASCII, so Wikipedia's curly quotes and dashes ("Gödel’s", "1914–1918") normalize like their ASCII
forms. A prediction that normalizes to nothing (only articles or punctuation) never matches: otherwise
"the" would exactly match a gold answer "a".
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

_ARTICLES = re.compile(r"\b(a|an|the)\b")


@lru_cache(maxsize=1)
def _punctuation_table() -> dict[int, None]:
    punct = {c for c in map(chr, range(sys.maxunicode + 1)) if unicodedata.category(c).startswith("P")}
    return dict.fromkeys(map(ord, punct | set(string.punctuation)))


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop a/an/the, collapse whitespace.

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = text.lower().translate(_punctuation_table())
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golds: str | Sequence[str]) -> list[str]:
    if isinstance(golds, str):
        golds = [golds]
    return [n for n in (normalize_answer(g) for g in golds) if n]


def exact_match(pred: str | None, golds: str | Sequence[str]) -> float:
    """1.0 if the normalized prediction equals any normalized gold answer, else 0.0."""
    p = normalize_answer(pred) if pred else ""
    return float(bool(p) and p in _golds(golds))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(pred: str | None, golds: str | Sequence[str]) -> float:
    """Token-level F1 between the normalized prediction and the best-matching gold answer."""
    p = normalize_answer(pred).split() if pred else []
    if not p:
        return 0.0
    return max((_f1(p, g.split()) for g in _golds(golds)), default=0.0)


def contains_answer(text: str | None, golds: str | Sequence[str]) -> bool:
    """Whether a normalized gold answer occurs in the normalized text as whole words.

    Whole words so that gold "art" is not found in "party". Used for "the gold answer was retrieved".
    """
    t = normalize_answer(text) if text else ""
    if not t:
        return False
    padded = f" {t} "
    return any(f" {g} " in padded for g in _golds(golds))


def echoes_question(pred: str | None, question: str, golds: str | Sequence[str]) -> bool:
    """Every normalized word of the prediction (less filler such as "answer" and "is") is a word of the
    question, and the words it shares with a gold answer are common nouns the question writes in lower
    case: the answer only repeats the question ("gravitational force" for "what is the common name for
    gravitational force?"; "second-longest river in China" for the Yellow River, sharing only "river").
    Such an answer is wrong whatever a small judge model says; the distiller is told of it too. A prediction
    sharing a name with a gold ("Jefferson" for "Adams or Jefferson?", capitalised in the question) never
    echoes: a choice the question offers is an answer.
    """
    p = set(normalize_answer(pred).split()) - _FILLER if pred else set()
    if not p or not p <= set(normalize_answer(question).split()):
        return False
    common = _lower_case_words(question)
    return all((p & set(g.split())) <= common for g in _golds(golds))


# Words a reply wraps an echo in ("the answer is ...", "it was named ...").
_FILLER = frozenset({"answer", "is", "was", "it", "this", "that", "name", "named", "called"})


def _lower_case_words(text: str) -> set[str]:
    """Normalized words of ``text`` written in lower case there (common nouns, not names)."""
    return {normalize_answer(w) for w in text.split() if w[:1].islower()} - {""}


def copies_question(pred: str | None, question: str) -> bool:
    """The prediction is the question, or most of it, given back: its words are all the question's and cover
    at least 60% of them (four words at least). Never an answer, even when it contains the gold's words ("Name
    the island that is the largest in Canada" for Baffin Island), which :func:`echoes_question` lets through.
    """
    p = normalize_answer(pred).split() if pred else []
    q = normalize_answer(question).split()
    if not p or not q or not set(p) <= set(q):
        return False
    return len(p) >= max(4, 0.6 * len(q)) or p == q


# Replies that say there is no answer: wrong unless the gold itself is one (exact match is checked first).
NON_ANSWERS = frozenset({"unknown", "i dont know", "i do not know", "not found", "no answer", "none", "na"})


def misses_yes_no(pred: str | None, golds: str | Sequence[str]) -> bool:
    """Every gold is "yes" or "no" and the prediction does not start with either: it answers another question
    ("Greek" for "were Demosthenes and Picasso of the same nationality?"), whatever a judge model reads in it."""
    g = _golds(golds)
    p = normalize_answer(pred).split() if pred else []
    return bool(g) and set(g) <= {"yes", "no"} and bool(p) and p[0] not in ("yes", "no")


def is_placeholder(pred: str | None, placeholders: Sequence[str]) -> bool:
    """The prediction, normalized, is one of ``placeholders`` (example texts the prompts show inside tags,
    ``prompts.template_placeholders()``), says there is no answer (:data:`NON_ANSWERS`), or is a single
    letter ("A", "M": a cut-off reply, not a name; a single digit is a number)."""
    chars = [c for c in pred or "" if c.isalnum()]
    if len(chars) == 1 and chars[0].isalpha():
        return True
    p = normalize_answer(pred) if pred else ""
    return bool(p) and (p in NON_ANSWERS or p in {normalize_answer(x) for x in placeholders})


_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}


def _stems(text: str, n: int = 4) -> set[str]:
    """The first ``n`` characters of each normalized word (hyphenated parts too, number words as digits), and
    the words run together: what two names of one thing usually share ("Senegalese"/"Senegal", "Ant Man"/
    "Ant-Man", "eleven"/"11")."""
    words = normalize_answer(text.replace("-", " ")).split()
    words = [_NUMBER_WORDS.get(w, w) for w in words]
    return {w[:n] for w in words} | {"".join(words)[:n]} if words else set()


def shares_a_stem(pred: str | None, golds: str | Sequence[str]) -> bool:
    """Whether the prediction and a gold answer share a word's first four characters. A miss that shares none
    names something else far more often than an alias does: of 158 wrong real solver answers 123 share none,
    of 81 right ones 1 ("Switzerland" for Swiss; benchmarks/data/judge_pairs_solver.jsonl)."""
    p = _stems(pred or "")
    golds = [golds] if isinstance(golds, str) else list(golds)
    return any(p & _stems(g) for g in golds)
