"""The checks a distilled (or mined) candidate skill must pass, and the word/entity helpers they use. The
distiller's masked view shares some: a question's entities, their masking, and what went wrong in a failed
rollout (:func:`failure_notes`, which a skill must not restate).

``check_candidate`` takes the fields :func:`sesa_graph.memory.distiller.parse_skill_output` found and
rejects, each with a counted reason: empty fields, over-long text, vacuous advice, and entities copied
from the failing question or its answers (a skill must generalise, not memorise one question).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sesa_graph.memory.config import MemoryConfig
from sesa_graph.memory.queue import FailureRecord, PendingFailure
from sesa_graph.memory.skill import MAX_QUERIES, Skill, content_id
from sesa_graph.prompts import (
    NOTE_ANSWER_NOT_RETRIEVED,
    NOTE_ANSWER_REPEATS_QUESTION,
    NOTE_ANSWER_RETRIEVED,
    NOTE_NO_ANSWER,
    NOTE_NO_SEARCH,
    NOTE_REPEATED_SEARCH,
)
from sesa_graph.scoring import echoes_question

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "than",
        "that",
        "this",
        "these",
        "those",
        "there",
        "here",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "without",
        "about",
        "into",
        "onto",
        "over",
        "under",
        "between",
        "among",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "up",
        "down",
        "out",
        "off",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "done",
        "have",
        "has",
        "had",
        "having",
        "it",
        "its",
        "it's",
        "they",
        "them",
        "their",
        "he",
        "him",
        "his",
        "she",
        "her",
        "we",
        "us",
        "our",
        "you",
        "your",
        "i",
        "me",
        "my",
        "who",
        "whom",
        "whose",
        "which",
        "what",
        "when",
        "where",
        "why",
        "how",
        "not",
        "no",
        "nor",
        "so",
        "too",
        "very",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "also",
        "just",
        "only",
        "any",
        "all",
        "each",
        "every",
        "both",
        "either",
        "neither",
        "some",
        "such",
        "same",
        "other",
        "another",
        "own",
        "one",
        "two",
        "as",
        "it",
        "per",
        "via",
        "vs",
        "e.g",
        "i.e",
        "etc",
        "like",
        "more",
        "most",
        "less",
        "least",
        "much",
        "many",
        "few",
        "several",
    ]
)

# Words that every piece of search advice contains; advice made only of these says nothing.
GENERIC = frozenset(
    [
        "search",
        "searches",
        "searching",
        "searched",
        "query",
        "queries",
        "question",
        "questions",
        "answer",
        "answers",
        "answering",
        "information",
        "info",
        "relevant",
        "relevance",
        "carefully",
        "careful",
        "thoroughly",
        "thorough",
        "better",
        "best",
        "good",
        "right",
        "correct",
        "correctly",
        "accurate",
        "accurately",
        "sure",
        "make",
        "makes",
        "making",
        "always",
        "never",
        "try",
        "trying",
        "find",
        "finding",
        "found",
        "look",
        "looking",
        "check",
        "checking",
        "checked",
        "verify",
        "use",
        "using",
        "used",
        "result",
        "results",
        "source",
        "sources",
        "think",
        "thinking",
        "step",
        "steps",
        "helpful",
        "useful",
        "important",
        "specific",
        "details",
        "detail",
        "again",
        "keyword",
        "keywords",
        "term",
        "terms",
        "need",
        "needs",
        "get",
        "getting",
        "read",
        "reading",
        "first",
        "next",
        "agent",
        "skill",
        "skills",
        "approach",
        "strategy",
        "way",
        "ways",
        "thing",
        "things",
        "fact",
        "facts",
        "data",
        "properly",
        "appropriate",
        "appropriately",
        "possible",
        "relevant",
        "related",
        "consider",
        "ensure",
    ]
)

_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_BRACKETS_RE = re.compile(r"\[[^\]]*\]|\{[^}]*\}|<[^>]*>")


# Sentence-initial words that are capitalised only because they start the question.
_OPENERS = frozenset(["name", "list", "give", "tell", "identify", "state", "compare", "find", "which"])
# Answers whose words every skill may use.
_COMMON_ANSWERS = frozenset(["yes", "no", "true", "false", "none", "unknown"])


def _words(text: str, placeholders: bool = False) -> list[str]:
    """Lowercased words; ``[placeholder]`` spans are dropped unless ``placeholders``."""
    text = text if placeholders else _BRACKETS_RE.sub(" ", text)
    return [w.lower().strip("'’-") for w in _WORD_RE.findall(text)]


def content_words(text: str) -> set[str]:
    return {w for w in _words(text) if w not in STOPWORDS and w not in GENERIC and len(w) > 2}


def question_entities(question: str, golds: Sequence[str] = (), answer: str | None = None) -> set[str]:
    """Lowercased words that name something specific in the failing question or its answers.

    Capitalised words that are not stopwords, numbers of two or more digits, the words of quoted
    spans, and every content word of the gold and predicted answers.
    """
    ents: set[str] = set()
    for sentence in re.split(r"(?<=[.?!;:])\s+", question):
        for i, tok in enumerate(_WORD_RE.findall(sentence)):
            low = tok.lower().strip("'’-")
            if low in STOPWORDS or len(low) < 2 or (i == 0 and (low in GENERIC or low in _OPENERS)):
                continue
            if tok[0].isupper() or any(c.isdigit() for c in low):
                ents.add(low)
    for quoted in re.findall(r"[\"“]([^\"”]{3,})[\"”]", question):
        ents |= {w for w in _words(quoted) if w not in STOPWORDS}
    for text in [*golds, answer or ""]:
        ents |= {
            w
            for w in _words(text)
            if w not in STOPWORDS and w not in _COMMON_ANSWERS and (len(w) > 2 or w.isdigit())
        }
    return ents


def mask_entities(text: str, entities: set[str], slot: str = "[X]") -> str:
    """``text`` with every word of ``entities`` (as :func:`question_entities` gives them) replaced by
    ``slot``, a run of them (and the spaces between) by one slot: what a distiller may see of a question
    without being able to copy its names."""
    out: list[str] = []
    for part in re.split(r"([A-Za-z0-9][A-Za-z0-9'’\-]*)", text):
        if part and part.lower().strip("'’-") in entities:
            if out and out[-1] == slot:
                continue
            if len(out) >= 2 and out[-2] == slot and not out[-1].strip():
                out.pop()
                continue
            out.append(slot)
        elif part:
            out.append(part)
    return "".join(out)


def failure_notes(record: FailureRecord) -> list[str]:
    """What went wrong in a failed rollout, read from its record: an answer that repeats the question or
    none, whether the gold was in what its searches returned, no search or a repeated one."""
    notes = []
    if not (record.answer or "").strip():
        notes.append(NOTE_NO_ANSWER)
    elif echoes_question(record.answer, record.question, record.golds):
        notes.append(NOTE_ANSWER_REPEATS_QUESTION)
    read = " ".join(f"{d.get('title', '')} {d.get('text', '')}" for d in record.evidence).lower()
    if not record.searches:
        notes.append(NOTE_NO_SEARCH)
    elif any(g.strip() and g.lower() in read for g in record.golds):
        notes.append(NOTE_ANSWER_RETRIEVED)
    else:
        notes.append(NOTE_ANSWER_NOT_RETRIEVED)
    if len(set(record.searches)) < len(record.searches):
        notes.append(NOTE_REPEATED_SEARCH)
    return notes


COPY_SPAN_WORDS = 6


def _restates(fields: dict[str, Any], record: Any, names: set[str]) -> bool:
    """A field of the advice repeats ``COPY_SPAN_WORDS`` words in a row of the failing question (its names
    left out) or of what the distiller was told went wrong: a restated prompt, not a skill. Small distillers
    answer "Were [X] and [X] of the same nationality?" as a trigger, or a note as what to avoid."""

    def spans(text: str) -> set[tuple[str, ...]]:
        words = [w for w in _words(text) if w not in names]
        return {tuple(words[i : i + COPY_SPAN_WORDS]) for i in range(len(words) - COPY_SPAN_WORDS + 1)}

    prompt = spans(record.question).union(*(spans(n) for n in failure_notes(record)))
    return any(spans(fields[k]) & prompt for k in ("description", "trigger", "avoid"))


def check_candidate(
    fields: dict[str, Any] | None,
    failure: PendingFailure,
    config: MemoryConfig,
    step: int,
    source: str = "distilled",
) -> tuple[Skill | None, str | None]:
    """(candidate skill, None) if it passes, else (None, reason)."""
    if fields is None:
        return None, "unparseable"
    for name in ("description", "trigger", "avoid"):
        if not fields.get(name, "").strip():
            return None, f"empty_{name}"
    queries = fields.get("queries") or []
    if not queries:
        return None, "empty_queries"
    queries = queries[:MAX_QUERIES]
    parts = [fields["description"], fields["trigger"], fields["avoid"], *queries]
    if any(len(p) > config.max_field_chars for p in parts) or sum(map(len, parts)) > config.max_skill_chars:
        return None, "too_long"
    advice = " ".join([fields["description"], fields["trigger"], fields["avoid"]])
    if len(content_words(advice)) < config.min_content_words:
        return None, "vacuous"
    r = failure.record
    copied = question_entities(r.question, r.golds, r.answer) & set(
        _words(" ".join(parts), placeholders=True)
    )
    if copied:
        return None, "copies_entities"
    if _restates(fields, r, names=question_entities(r.question, r.golds, r.answer)):
        return None, "copies_prompt"
    prefix = "d" if source == "distilled" else "m"
    skill = Skill(
        id=content_id(prefix, fields["description"], fields["trigger"]),
        description=fields["description"],
        trigger=fields["trigger"],
        avoid=fields["avoid"],
        queries=queries,
        category=fields.get("category") or "other",
        created_step=step,
        source=source,  # type: ignore[arg-type]
        source_failures=[failure.key],
    )
    return skill, None
