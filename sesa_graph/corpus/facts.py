"""Facts parsed from an article: its first clause ("X was a Soviet pilot and cosmonaut ..."), a short
clue, nationality, creator, year of an event, kind noun; and the text helpers the example kinds share."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from sesa_graph.corpus.articles import Article
from sesa_graph.scoring import contains_answer, normalize_answer

# "X (is|was) (a|an|the) <predicate>" at the start of the text, an optional appositive after the subject.
_CLAUSE = re.compile(
    r"^(?:The )?(.{1,80}?)(?:,[^.]{0,80},)? (is|was|are|were) (an?|the) ([^.;:()\[\]]{5,200})"
)
_NATIONALITY = re.compile(r"\b(?:is|was) an? ([A-Z][a-z]+(?:-[A-Z][a-z]+)?) ")
_YEAR_EVENT = re.compile(
    r"\b(founded|established|built|completed|published|released|composed|written|painted|discovered|invented|"
    r"signed|formed|opened|premiered|launched|fought)\b (?:in|on) (?:(?:\d{1,2} )?[A-Z][a-z]+ (?:\d{1,2}, )?)?"
    r"(\d{3,4})\b"
)
_BY = re.compile(r"^(.*?)\s+by ([A-Z][\w.'’-]+(?: (?:[a-z]{1,3} )?[A-Z][\w.'’-]+)*)$")
_NOT_NATIONALITY = {"American-born"}
_CREATOR_VERBS = (
    (("film", "movie", "documentary"), "directed"),
    (("painting", "fresco", "mural", "portrait", "triptych"), "painted"),
    (
        (
            "opera",
            "symphony",
            "concerto",
            "ballet",
            "oratorio",
            "composition",
            "song",
            "musical",
            "mass",
            "requiem",
            "cantata",
            "sonata",
            "suite",
            "score",
        ),
        "composed",
    ),
    (("sculpture", "statue"), "sculpted"),
    (
        (
            "novel",
            "book",
            "poem",
            "play",
            "comedy",
            "tragedy",
            "story",
            "essay",
            "treatise",
            "epic",
            "work",
            "novella",
            "text",
            "manifesto",
            "series",
            "memoir",
            "collection",
        ),
        "wrote",
    ),
)
_GENERIC_HEADS = {"of", "in", "and", "the", "a", "an", "by", "for", "to", "on", "from", "with", "at"}


# --------------------------------------------------------------------------- text helpers


def words(text: str) -> list[str]:
    return text.split()


def clip_words(text: str, n: int) -> str:
    return " ".join(words(text)[:n])


def lower_first(text: str) -> str:
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        return text[0].lower() + text[1:]
    return text


def mentions(text: str, phrase: str) -> bool:
    """Whole-word, normalized containment (``sesa_graph.scoring.contains_answer``)."""
    return bool(phrase.strip()) and contains_answer(text, [phrase])


_FUNCTION_WORDS = {
    "and",
    "or",
    "of",
    "the",
    "a",
    "an",
    "in",
    "on",
    "at",
    "to",
    "by",
    "for",
    "from",
    "with",
    "as",
    "its",
    "their",
    "his",
    "her",
    "both",
    "that",
    "which",
    "who",
    "is",
    "was",
}


def clue(predicate: str, max_words: int = 10) -> str | None:
    """A short, complete description from a predicate: cut at the first clause boundary, None when it is
    still longer than ``max_words`` or ends on a function word."""
    short = re.split(r",|;| who | which | that | whose | where ", predicate)[0].strip()
    parts = words(short)
    if not 2 <= len(parts) <= max_words or parts[-1].lower() in _FUNCTION_WORDS:
        return None
    return short


@dataclass(frozen=True)
class Clause:
    """The first sentence of an article: ``<subject> <verb> <det> <predicate>``."""

    verb: str
    det: str
    predicate: str  # cut at the first comma/semicolon, at most 18 words

    def phrase(self) -> str:
        return f"{self.det} {self.predicate}"


def first_clause(a: Article, doc_chars: int) -> Clause | None:
    """Parse the visible start of ``a``'s text; the subject must be the article itself."""
    m = _CLAUSE.match(a.text[:doc_chars])
    if not m:
        return None
    subject, verb, det, pred = m.groups()
    name, subj = normalize_answer(a.name), normalize_answer(subject)
    if not subj or not (subj in name or name in subj or subj.split()[0] == name.split()[0]):
        return None
    pred = re.split(r"[,;]| who | which | that ", pred)[0].strip() if len(words(pred)) > 18 else pred.strip()
    if not 2 <= len(words(pred)) <= 18 or words(pred)[-1].lower() in _FUNCTION_WORDS:
        return None
    if re.search(r"\b[A-Z]$", pred):  # cut at an initial ("Arthur C. Clarke")
        return None
    if mentions(pred, a.name):
        return None
    return Clause(verb, det.lower(), pred)


def _is_person(a: Article) -> bool:
    return a.topic == "People" or bool(re.search(r"\(\d{3,4}\s*[–-]\s*\d{3,4}\)", a.description))


def nationality(a: Article, doc_chars: int) -> str | None:
    if not _is_person(a):
        return None
    m = _NATIONALITY.search(a.text[:doc_chars].split(". ")[0])
    if not m or m.group(1) in _NOT_NATIONALITY:
        return None
    nat = m.group(1)
    return nat if re.fullmatch(r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?", nat) and len(nat) > 3 else None


def creator(a: Article, doc_chars: int) -> tuple[str, str, str] | None:
    """``(what, verb, creator name)`` from a description like ``1941 drama film by Orson Welles``;
    the creator must be named in the visible text."""
    m = _BY.match(a.description)
    if not m:
        return None
    what, who = m.group(1).strip(), m.group(2).strip()
    if not what or not mentions(a.text[:doc_chars], who) or mentions(who, a.name):
        return None
    head = what.lower().split()
    verb = "created"
    for nouns, v in _CREATOR_VERBS:
        if any(w.rstrip("s") in nouns or w in nouns for w in head):
            verb = v
            break
    return what, verb, who


def year_event(a: Article, doc_chars: int) -> tuple[str, str] | None:
    """``(verb, year)`` from "... published in 1869 ..." in the visible text."""
    m = _YEAR_EVENT.search(a.text[:doc_chars])
    return (m.group(1), m.group(2)) if m else None


def misspell(name: str, rng: random.Random) -> str | None:
    """Swap two inner letters of every word of five or more letters (``Pleiospilos`` -> ``Pleiopsilos``);
    None if there is no such word."""
    out, changed = [], False
    for w in name.split():
        if len(w) >= 5 and w.isalpha():
            i = rng.randrange(1, len(w) - 2)
            if w[i] != w[i + 1]:
                w = w[:i] + w[i + 1] + w[i] + w[i + 2 :]
                changed = True
        out.append(w)
    return " ".join(out) if changed else None


def description_ok(a: Article) -> bool:
    """Specific enough to ask for the article by its description alone."""
    d = a.description
    if len(words(d)) < 3 or mentions(d, a.name) or "(" in d:
        return False
    return bool(re.search(r"\d", d) or any(w[:1].isupper() for w in words(d)[1:]))


def kind_noun(a: Article) -> str | None:
    """The head noun of the description (``Dravidian language`` -> ``language``), if the text shows it."""
    d = re.sub(r"\([^)]*\)", "", a.description).strip().lower()
    d = re.split(r"\b(?:of|in|by|from|for|with|on|at|that|which|who)\b", d)[0].strip()
    if not d:
        return None
    head = d.split()[-1].strip(",.")
    if len(head) < 4 or head in _GENERIC_HEADS or not re.fullmatch(r"[a-z-]+", head):
        return None
    return head if re.search(rf"\b{re.escape(head)}\b", a.text[:400].lower()) else None


def question_word(a: Article) -> str:
    return "Who" if _is_person(a) else "What"
