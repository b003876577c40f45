"""Synthetic, grounded trajectories for the format warm-up (``sesa warmup``).

SmolLM2-135M-Instruct does not follow the tag protocol out of the box. The warm-up teaches it the format
by supervised fine-tuning on rollouts written here, each in exactly the token format the graphs produce
(docs/PROTOCOL.md):

- prompt: the chat template (with generation prompt) of the messages the graphs build
  (``graphs.solve.solver_messages`` / ``graphs.propose.proposer_messages``);
- completion: one assistant message that grows turn by turn: ``<think>..</think>\\n<search>query</search>``,
  then the observation the agent loop injects after a search, byte for byte (the same BM25 backend,
  ``k``, ``doc_chars`` cut, ``tools.render.render_docs`` and ``protocol.render_information``), ... and
  finally ``<think>..</think>\\n<answer>..</answer>`` (solver) or ``<question>..</question>``
  (proposer), then the end-of-turn token.

Each turn and each observation is tokenized on its own and the ids are concatenated, as in a rollout
(generated ids + ``encode_text(observation)``). Only the policy's own tokens (the turns and the end-of-turn
token) are trained: the prompt and the injected observations are masked out (``completion_mask`` 0), and
so are deliberately failed searches (a misspelled or vague query that the next turn recovers from): the
policy learns to recover from a miss, never to make one.

Questions are synthesized from the embedded corpus: the first sentence of an article ("X was a Soviet
pilot and cosmonaut who ..."), its Wikidata description ("1787 opera by Wolfgang Amadeus Mozart") and
entities it names that are articles too. Every example is **grounded**: each search is run through the
project's BM25 and the example is kept only if the article it is meant to find is among the ``k``
results, and the answer (or the fact the next search needs) is visible in the cut text the policy reads.
The exceptions are deliberate misses (verified *not* to find the article) in the ``retry_2`` and
``giveup_2`` kinds; after two of them the ``giveup_2`` answer comes from the article, unseen.

Kinds (``DEFAULT_MIX``): solver 1-hop (title from a first sentence or a description; nationality,
creator, year), solver 2-hop (bridge to an entity then its fact; bridge to an entity then the article;
two-entity comparisons: same nationality yes/no, "which is a X, A or B?"; a failed search -- no results
for a misspelled name, or other articles for a vague query -- then a different query; two failed searches,
then an answer from what the model knows, so that it never searches on forever), proposer 1-hop and 2-hop
(the proposer's question never contains the target; hops >= 2 use two distinct searches).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from graphs.propose import proposer_messages
from graphs.solve import solver_messages
from sesa_graph import protocol
from sesa_graph.config import ProposerConfig, SolverConfig
from sesa_graph.nodes.proposer import static_checks
from sesa_graph.scoring import contains_answer, normalize_answer
from tools.assets import embedded_corpus_file
from tools.backends import SearchBackend
from tools.corpus import Doc
from tools.render import render_docs

Role = Literal["solver", "proposer"]
Part = Literal["turn", "miss", "env"]

# kind -> (role, share of the examples). Solver kinds first; "_2" kinds are two-hop.
DEFAULT_MIX: dict[str, float] = {
    "title_clause": 0.11,  # "What is a dystopian novel by English writer George Orwell?" -> Nineteen Eighty-Four
    "title_desc": 0.05,  # "What is the name of the 1787 opera by Wolfgang Amadeus Mozart?" -> Don Giovanni
    "nationality": 0.07,  # "What nationality was Yuri Gagarin?" -> Soviet
    "creator": 0.05,  # "Who directed Citizen Kane?" -> Orson Welles
    "year": 0.04,  # "In what year was War and Peace published?" -> 1869
    "bridge_fact_2": 0.08,  # "What nationality was the person who directed Citizen Kane?" -> American
    "bridge_title_2": 0.09,  # A's first sentence with its entity B described by B's first sentence -> A
    "compare_same_2": 0.06,  # "Were X and Y of the same nationality?" -> yes/no
    "compare_kind_2": 0.06,  # "Which is a language, X or Y?" -> X
    "retry_2": 0.06,  # a failed search (misspelled: no results; too vague: other articles), a new query, answer
    "giveup_2": 0.05,  # two failed searches, then an answer from what the model knows (no endless searching)
    "propose_1": 0.14,
    "propose_2": 0.14,  # hops 2 or 3, two distinct searches
}
PROPOSER_KINDS = ("propose_1", "propose_2")

_PAREN_TAIL = re.compile(r"\s*\([^()]*\)$")
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
_CAPSPAN = re.compile(
    r"[A-Z][\w'’.-]*(?: (?:of|the|de|da|von|van|del|and|in) [A-Z][\w'’.-]*| [A-Z][\w'’.-]*)*"
)
_NOT_NATIONALITY = {"American-born"}
# a bridge entity must stand as a noun phrase: after one of these words ...
_BRIDGE_BEFORE = {
    "of",
    "in",
    "by",
    "from",
    "to",
    "on",
    "at",
    "the",
    "and",
    "with",
    "for",
    "near",
    "into",
    "between",
    "across",
    "throughout",
    "within",
    "against",
    "under",
    "over",
    "via",
    "during",
    "around",
    "off",
}
# ... and before one of these (or a comma, or the end)
_BRIDGE_AFTER = {
    "and",
    "or",
    "in",
    "of",
    "from",
    "to",
    "on",
    "at",
    "after",
    "before",
    "during",
    "with",
    "by",
    "for",
    "since",
    "until",
    "between",
    "as",
    "near",
    "into",
    "that",
    "which",
    "who",
    "where",
    "when",
}
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


# --------------------------------------------------------------------------- the corpus, with descriptions


@dataclass(frozen=True)
class Article:
    """An embedded-corpus article; ``text`` is the extract the search backend indexes."""

    title: str
    text: str
    description: str = ""
    topic: str = ""

    @property
    def name(self) -> str:
        """The title without a trailing disambiguation: ``Shock (circulatory)`` -> ``Shock``."""
        return _PAREN_TAIL.sub("", self.title).strip() or self.title


@lru_cache(maxsize=1)
def _articles() -> tuple[Article, ...]:
    with open(embedded_corpus_file(), encoding="utf-8") as f:
        raw = json.load(f)
    return tuple(
        Article(
            title,
            raw[title].get("extract") or "",
            (raw[title].get("description") or "").strip(),
            raw[title].get("topic") or "",
        )
        for title in sorted(raw)
    )


def load_articles() -> list[Article]:
    """The embedded corpus (same titles and texts as ``tools.corpus.load_embedded_corpus``) with the
    Wikidata description and topic of each article."""
    return list(_articles())


# --------------------------------------------------------------------------- the example record


@dataclass(frozen=True)
class Miss:
    """A search step that must *not* retrieve ``title`` (a misspelled or too vague query), so that the
    next turn shows how to recover: a different query, never the same one again."""

    title: str


@dataclass
class WarmupExample:
    """One synthetic rollout.

    ``segments`` is the completion in order: ``(text, part)`` with part ``"turn"`` (a policy turn, trained),
    ``"miss"`` (a policy turn that searches badly on purpose: context only, not trained) or ``"env"`` (an
    observation the environment injects, not trained). The end-of-turn token is added when encoding.
    """

    role: Role
    kind: str
    hops: int
    messages: list[dict[str, str]]
    segments: list[tuple[str, Part]]
    final: str  # the solver's answer or the proposer's question
    target: str  # the solver's gold answer, or the proposer's target
    sources: list[str | None]  # per search: the title it had to retrieve (None: a deliberate miss)
    queries: list[str]
    searches: list[dict[str, Any]] = field(default_factory=list)  # as the agent loop records them
    missed: str | None = None  # the article the deliberately failed searches (sources None) did not find

    @property
    def completion(self) -> str:
        return "".join(text for text, _ in self.segments)

    @property
    def turns(self) -> list[str]:
        """The policy's turns (trained or not), in order."""
        return [text for text, part in self.segments if part != "env"]

    @property
    def trained_text(self) -> str:
        return "".join(text for text, part in self.segments if is_trained(part))

    def to_record(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "kind": self.kind,
            "hops": self.hops,
            "messages": self.messages,
            "completion": self.completion,
            "final": self.final,
            "target": self.target,
            "sources": self.sources,
            "queries": self.queries,
            "missed": self.missed,
        }


def is_trained(part: Part | bool) -> bool:
    """Whether a segment is trained: ``"turn"`` (``True`` is accepted for single-turn examples built
    elsewhere, e.g. ``training.warmup_distiller``)."""
    return part is True or part == "turn"


def observation(docs: Sequence[Doc], doc_chars: int, notice: str | None = None) -> tuple[list[Doc], str]:
    """The cut docs and the exact text the agent loop injects after a search (see ``run_search``)."""
    cut = [Doc(d.id, d.title, d.text[:doc_chars], d.score) for d in docs]
    return cut, protocol.render_information(render_docs(cut), notice=notice)


def turn_text(think: str, action: str, content: str) -> str:
    """``<think>..</think>\\n<action>content</action>``, rendered (and escaped) by the protocol module."""
    render = {
        "search": protocol.render_search,
        "answer": protocol.render_answer,
        "question": protocol.render_question,
    }[action]
    return f"{protocol.render_think(think)}\n{render(content)}"


# --------------------------------------------------------------------------- text helpers


def _words(text: str) -> list[str]:
    return text.split()


def _clip_words(text: str, n: int) -> str:
    return " ".join(_words(text)[:n])


def _lower_first(text: str) -> str:
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        return text[0].lower() + text[1:]
    return text


def _mentions(text: str, phrase: str) -> bool:
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
    words = _words(short)
    if not 2 <= len(words) <= max_words or words[-1].lower() in _FUNCTION_WORDS:
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
    pred = re.split(r"[,;]| who | which | that ", pred)[0].strip() if len(_words(pred)) > 18 else pred.strip()
    if not 2 <= len(_words(pred)) <= 18 or _words(pred)[-1].lower() in _FUNCTION_WORDS:
        return None
    if re.search(r"\b[A-Z]$", pred):  # cut at an initial ("Arthur C. Clarke")
        return None
    if _mentions(pred, a.name):
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
    if not what or not _mentions(a.text[:doc_chars], who) or _mentions(who, a.name):
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
    if len(_words(d)) < 3 or _mentions(d, a.name) or "(" in d:
        return False
    return bool(re.search(r"\d", d) or any(w[:1].isupper() for w in _words(d)[1:]))


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


def _question_word(a: Article) -> str:
    return "Who" if _is_person(a) else "What"


# --------------------------------------------------------------------------- the synthesizer


class Synthesizer:
    """Builds grounded examples of every kind from the corpus and a search backend."""

    def __init__(
        self,
        search: SearchBackend,
        articles: Sequence[Article] | None = None,
        *,
        k: int | None = None,
        doc_chars: int | None = None,
        solver_max_turns: int | None = None,
        seed: int = 0,
    ) -> None:
        scfg = SolverConfig()
        self.search_backend = search
        self.articles = list(articles) if articles is not None else load_articles()
        self.k = k or scfg.search_k
        self.doc_chars = doc_chars or scfg.doc_chars
        self.solver_max_turns = solver_max_turns or scfg.max_turns
        self.rng = random.Random(seed)
        self.proposer_checks = ProposerConfig()
        self._cache: dict[str, list[Doc]] = {}
        self.by_name: dict[str, Article] = {}
        for a in self.articles:
            self.by_name.setdefault(a.name, a)
        dc = self.doc_chars
        self.clauses = {a.title: c for a in self.articles if (c := first_clause(a, dc))}
        self.nats = {a.title: n for a in self.articles if (n := nationality(a, dc))}
        self.creators = {a.title: c for a in self.articles if (c := creator(a, dc))}
        self.years = {a.title: y for a in self.articles if (y := year_event(a, dc))}
        self.kinds = {a.title: h for a in self.articles if (h := kind_noun(a))}
        self.pools: dict[str, list[Article]] = {
            "title_clause": [a for a in self.articles if a.title in self.clauses],
            "title_desc": [a for a in self.articles if description_ok(a)],
            "nationality": [a for a in self.articles if a.title in self.nats],
            "creator": [a for a in self.articles if a.title in self.creators],
            "year": [a for a in self.articles if a.title in self.years],
            "bridge_fact_2": [
                a
                for a in self.articles
                if a.title in self.creators and self._person(self.creators[a.title][2]) is not None
            ],
            "bridge_title_2": [a for a in self.articles if a.title in self.clauses and self._bridge(a)],
            "compare_same_2": [a for a in self.articles if a.title in self.nats],
            "compare_kind_2": [a for a in self.articles if a.title in self.kinds],
            "retry_2": [a for a in self.articles if a.title in self.nats or a.title in self.creators],
            "giveup_2": [a for a in self.articles if a.title in self.nats or a.title in self.creators],
            "propose_1": [a for a in self.articles if a.title in self.clauses],
            "propose_2": [a for a in self.articles if a.title in self.clauses and self._bridge(a)],
        }
        for pool in self.pools.values():
            self.rng.shuffle(pool)

    # ---- search -------------------------------------------------------------------------------------
    def search(self, query: str) -> list[Doc]:
        if query not in self._cache:
            (docs,) = self.search_backend.search([query], self.k)
            self._cache[query] = list(docs)
        return self._cache[query]

    def _find(self, query: str, title: str) -> tuple[int, list[Doc], str] | None:
        """Run ``query``; None unless ``title`` is among the results. Returns its 1-based rank, the cut
        docs and the observation text."""
        docs = self.search(query)
        for i, d in enumerate(docs, start=1):
            if d.title == title:
                cut, text = observation(docs, self.doc_chars)
                return i, cut, text
        return None

    # ---- helpers ------------------------------------------------------------------------------------
    def _person(self, name: str) -> Article | None:
        a = self.by_name.get(name)
        return a if a is not None and a.title in self.nats else None

    def _bridge(self, a: Article) -> Article | None:
        """An article named in ``a``'s first-sentence predicate, as a noun phrase of its own (a whole
        capitalized span after a preposition or article, not a modifier such as "Baroque period"), that
        has a short first-sentence clue of its own."""
        clause = self.clauses.get(a.title)
        if clause is None:
            return None
        pred = clause.predicate
        best: Article | None = None
        for m in _CAPSPAN.finditer(pred):
            b = self.by_name.get(m.group(0))
            if b is None or b.title == a.title or b.title not in self.clauses or len(b.name) <= 3:
                continue
            before = pred[: m.start()].split()
            after = pred[m.end() :].split()
            if not before or before[-1].lower() not in _BRIDGE_BEFORE:
                continue
            if after and after[0].lower().strip(",") not in _BRIDGE_AFTER and not after[0].startswith(","):
                continue
            if clue(self.clauses[b.title].predicate) is None:
                continue
            if best is None or len(b.name) > len(best.name):
                best = b
        return best

    def _hide(self, a: Article, b: Article) -> tuple[str, str] | None:
        """``a``'s predicate with ``b`` replaced by ``b``'s clue; (clue phrase, new predicate)."""
        cb = self.clauses[b.title]
        short = clue(cb.predicate)
        if short is None:
            return None
        inner = f"{cb.det} {short}"
        pred, n = re.subn(
            rf"\b(?:(?:the|a|an) )?{re.escape(b.name)}(?=$|[\s,])",
            inner,
            self.clauses[a.title].predicate,
            count=1,
        )
        return (inner, pred) if n else None

    def _solver(
        self,
        kind: str,
        question: str,
        answer: str,
        steps: list[tuple[str, str, str | Miss]],
        final_think: str,
    ) -> WarmupExample | None:
        """``steps``: (think, query, title that must be retrieved, or ``Miss(title)``: must not be); the
        answer must be visible in some observation (or be a yes/no)."""
        return self._build(
            "solver",
            kind,
            2 if len(steps) > 1 else 1,
            solver_messages(question, None, self.solver_max_turns),
            steps,
            final_think,
            "answer",
            answer,
            answer,
        )

    def _build(
        self,
        role: Role,
        kind: str,
        hops: int,
        messages: list[dict[str, str]],
        steps: list[tuple[str, str, str | Miss]],
        final_think: str,
        action: str,
        final: str,
        target: str,
    ) -> WarmupExample | None:
        segments: list[tuple[str, Part]] = []
        searches: list[dict[str, Any]] = []
        seen = ""
        ranks: list[int] = []
        for think, query, title in steps:
            if isinstance(title, Miss):
                docs = self.search(query)
                if any(d.title == title.title for d in docs):
                    return None
                rank, (cut, text) = 0, observation(docs, self.doc_chars)
            else:
                hit = self._find(query, title) if title else None
                if hit is None:
                    return None
                rank, cut, text = hit
            # "{prev}" in a search turn's think is the rank of the doc the previous search was after
            think = think.replace("{prev}", str(ranks[-1]) if ranks else "1")
            ranks.append(rank)
            segments.append(
                (turn_text(think, "search", query), "miss" if isinstance(title, Miss) else "turn")
            )
            segments.append((text, "env"))
            searches.append(
                {
                    "query": query,
                    "docs": [{"id": d.id, "title": d.title, "text": d.text, "score": d.score} for d in cut],
                }
            )
            seen += text
        if (
            role == "solver"
            and kind != "giveup_2"
            and final.lower() not in ("yes", "no")
            and not _mentions(seen, final)
        ):
            return None  # the answer must be readable in what the policy was shown
        segments.append((turn_text(final_think.replace("{rank}", str(ranks[-1])), action, final), "turn"))
        return WarmupExample(
            role,
            kind,
            hops,
            messages,
            segments,
            final,
            target,
            [None if isinstance(t, Miss) else t for _, _, t in steps],
            [q for _, q, _ in steps],
            searches,
            next((t.title for _, _, t in steps if isinstance(t, Miss)), None),
        )

    # ---- solver kinds -------------------------------------------------------------------------------
    def title_clause(self, a: Article) -> WarmupExample | None:
        c = self.clauses[a.title]
        question = f"{_question_word(a)} {c.verb} {c.phrase()}?"
        query = _clip_words(c.predicate, 10)
        return self._solver(
            "title_clause",
            question,
            a.name,
            [
                (f"I need to find what is described as {_clip_words(c.predicate, 8)}.", query, a.title),
            ],
            f"Doc {{rank}} is about {a.name}, which {c.verb} {c.phrase()}.",
        )

    def title_desc(self, a: Article) -> WarmupExample | None:
        d = _lower_first(a.description)
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
            f"Who {verb} {a.name}?"
            if verb != "created"
            else f"Who created the {_lower_first(what)} {a.name}?"
        )
        return self._solver(
            "creator",
            question,
            who,
            [
                (f"I need to find out about {a.name}.", a.name, a.title),
            ],
            f"Doc {{rank}} says {a.name} is a {_lower_first(what)} by {who}.",
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
        b = self._person(who)
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
        c, b = self.clauses[a.title], self._bridge(a)
        if b is None:
            return None
        hidden = self._hide(a, b)
        if hidden is None:
            return None
        inner, pred = hidden
        cb = self.clauses[b.title]
        short = clue(cb.predicate)
        question = f"{_question_word(a)} {c.verb} {c.det} {pred}?"
        if _mentions(question, a.name) or _mentions(question, b.name):
            return None
        return self._solver(
            "bridge_title_2",
            question,
            a.name,
            [
                (f"First I need to find {inner}.", short, b.title),
                (
                    f"Doc {{prev}} says that is {b.name}. Now I search for {_clip_words(c.predicate, 8)}.",
                    _clip_words(c.predicate, 12),
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
                f"Doc {{rank}} says {name} is a {_lower_first(what)} by {who}.",
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
            len(_words(vague)) < 2
            or _mentions(vague, a.name)
            or _mentions(vague, answer)
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

    # ---- proposer kinds -----------------------------------------------------------------------------
    def _proposer(
        self,
        kind: str,
        hops: int,
        a: Article,
        steps: list[tuple[str, str, str | Miss]],
        final_think: str,
        question: str,
    ) -> WarmupExample | None:
        if _mentions(question, a.name) or _mentions(question, a.title):
            return None
        ex = self._build(
            "proposer",
            kind,
            hops,
            proposer_messages(a.name, hops),
            steps,
            final_think,
            "question",
            question,
            a.name,
        )
        if ex is None:
            return None
        state = {
            "status": "answered",
            "final": question,
            "target": a.name,
            "hops": hops,
            "searches": ex.searches,
        }
        return ex if static_checks(state, self.proposer_checks) is None else None

    def propose_1(self, a: Article) -> WarmupExample | None:
        c = self.clauses[a.title]
        question = f"{_question_word(a)} {c.verb} {c.phrase()}?"
        return self._proposer(
            "propose_1",
            1,
            a,
            [
                (f"I should read about {a.name} first.", a.name, a.title),
            ],
            f"Doc {{rank}} says {a.name} {c.verb} {c.phrase()}. I can ask for that without naming it.",
            question,
        )

    def propose_2(self, a: Article) -> WarmupExample | None:
        c, b = self.clauses[a.title], self._bridge(a)
        if b is None:
            return None
        hidden = self._hide(a, b)
        if hidden is None:
            return None
        inner, pred = hidden
        cb = self.clauses[b.title]
        question = f"{_question_word(a)} {c.verb} {c.det} {pred}?"
        if _mentions(question, b.name):
            return None
        hops = self.rng.choice([2, 2, 3])
        return self._proposer(
            "propose_2",
            hops,
            a,
            [
                (f"I should read about {a.name} first.", a.name, a.title),
                (
                    (
                        f"Doc {{prev}} says {a.name} {c.verb} {_clip_words(c.phrase(), 10)}. It mentions {b.name}; "
                        f"I will look it up to hide it behind a clue."
                    ),
                    b.name,
                    b.title,
                ),
            ],
            f"Doc {{rank}} says {b.name} {cb.verb} {inner}. I replace {b.name} with that clue.",
            question,
        )

    # ---- the mix ------------------------------------------------------------------------------------
    def make(self, kind: str, a: Article) -> WarmupExample | None:
        return getattr(self, kind)(a)

    def generate(
        self, n: int, mix: dict[str, float] | None = None, max_tries: int = 40
    ) -> list[WarmupExample]:
        """``n`` grounded examples, split over the kinds by ``mix`` (largest remainder), shuffled.

        A kind whose pool runs dry leaves its share to the others; fewer than ``n`` only if all do.
        """
        if n < 1:
            raise ValueError(f"examples must be >= 1, got {n}")
        mix = dict(mix or DEFAULT_MIX)
        unknown = set(mix) - set(DEFAULT_MIX)
        if unknown:
            raise ValueError(f"unknown example kinds {sorted(unknown)}; known: {sorted(DEFAULT_MIX)}")
        quotas = allocate(n, mix)
        cursors = {kind: 0 for kind in mix}
        out: list[WarmupExample] = []
        seen: set[str] = set()
        while True:
            progressed = False
            for kind, quota in quotas.items():
                made = sum(1 for e in out if e.kind == kind)
                tries = 0
                pool = self.pools[kind]
                while made < quota and tries < max_tries * quota and cursors[kind] < len(pool):
                    a = pool[cursors[kind]]
                    cursors[kind] += 1
                    tries += 1
                    ex = self.make(kind, a)
                    key = ex.messages[-1]["content"] if ex else ""
                    if ex is None or key in seen:
                        continue
                    seen.add(key)
                    out.append(ex)
                    made += 1
                    progressed = True
            missing = n - len(out)
            if missing <= 0 or not progressed:
                break
            # give the shortfall to the kinds that still have candidates
            live = [k for k in quotas if cursors[k] < len(self.pools[k])]
            if not live:
                break
            for i in range(missing):
                quotas[live[i % len(live)]] += 1
        self.rng.shuffle(out)
        return out[:n]


def allocate(n: int, mix: dict[str, float]) -> dict[str, int]:
    """Split ``n`` over the kinds in proportion to ``mix`` (largest remainder; every kind with a positive
    weight gets at least one example once ``n`` reaches the number of kinds)."""
    total = sum(w for w in mix.values() if w > 0)
    if total <= 0:
        raise ValueError("the mix needs at least one positive weight")
    exact = {k: n * w / total for k, w in mix.items() if w > 0}
    quotas = {k: int(v) for k, v in exact.items()}
    if n >= len(exact):
        for k, q in quotas.items():
            quotas[k] = max(q, 1)
    rest = n - sum(quotas.values())
    for k in sorted(exact, key=lambda k: exact[k] - int(exact[k]), reverse=True):
        if rest <= 0:
            break
        quotas[k] += 1
        rest -= 1
    while rest < 0:  # the minimum of one per kind overshot: take from the largest
        k = max(quotas, key=quotas.get)
        quotas[k] -= 1
        rest += 1
    return quotas


# --------------------------------------------------------------------------- tokens and masks


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Chat template with the generation prompt: what ``LocalPolicy.encode_messages`` returns."""
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """What ``LocalPolicy.encode_text`` returns (no special tokens added)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def end_of_turn_id(tokenizer: Any) -> int:
    """The token the chat template closes an assistant message with (``<|im_end|>`` for SmolLM2 and
    Qwen, ``<|eot_id|>`` for Llama 3), else the tokenizer's EOS."""
    probe = "\u2063probe\u2063"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": probe}], tokenize=False
        )
        tail = text[text.index(probe) + len(probe) :]
        ids = text_ids(tokenizer, tail) if tail else []
        special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        if ids and ids[0] in special:
            return int(ids[0])
    except Exception:  # noqa: BLE001, S110 - no chat template or an exotic one: fall back to EOS
        pass
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has neither a chat template end-of-turn token nor an EOS token")
    return int(tokenizer.eos_token_id)


def encode_example(ex: WarmupExample, tokenizer: Any, eot_id: int | None = None) -> dict[str, list[int]]:
    """``input_ids`` (prompt + completion) and ``completion_mask`` (1 on the policy's own tokens: its turns
    and the closing end-of-turn token; 0 on the prompt and on injected observations)."""
    ids = prompt_ids(tokenizer, ex.messages)
    mask = [0] * len(ids)
    for text, part in ex.segments:
        seg = text_ids(tokenizer, text)
        ids += seg
        mask += [int(is_trained(part))] * len(seg)
    ids.append(end_of_turn_id(tokenizer) if eot_id is None else eot_id)
    mask.append(1)
    return {"input_ids": ids, "completion_mask": mask}
