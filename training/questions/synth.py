"""Synthetic, grounded trajectories: the synthesizer and its mix. The format warm-up (``sesa warmup``)
trains on them; the self-play bootstrap (``training.step``) asks their solver questions while
the proposer has no valid question yet.

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

import random
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from graphs.solve import solver_messages
from sesa_graph.config import ProposerConfig, SolverConfig
from sesa_graph.corpus.articles import Article, load_articles
from sesa_graph.corpus.facts import (
    clue,
    creator,
    description_ok,
    first_clause,
    kind_noun,
    mentions,
    nationality,
    year_event,
)
from tools.backends import SearchBackend
from tools.corpus import Doc
from training.questions.examples import Miss, Part, Role, WarmupExample, observation, turn_text
from training.questions.kinds_proposer import ProposerKinds
from training.questions.kinds_solver import SolverKinds

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

_CAPSPAN = re.compile(
    r"[A-Z][\w'’.-]*(?: (?:of|the|de|da|von|van|del|and|in) [A-Z][\w'’.-]*| [A-Z][\w'’.-]*)*"
)
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


# --------------------------------------------------------------------------- the synthesizer


class Synthesizer(SolverKinds, ProposerKinds):
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
        self._unshuffled: dict[str, list[Article]] = {
            "title_clause": [a for a in self.articles if a.title in self.clauses],
            "title_desc": [a for a in self.articles if description_ok(a)],
            "nationality": [a for a in self.articles if a.title in self.nats],
            "creator": [a for a in self.articles if a.title in self.creators],
            "year": [a for a in self.articles if a.title in self.years],
            "bridge_fact_2": [
                a
                for a in self.articles
                if a.title in self.creators and self.person(self.creators[a.title][2]) is not None
            ],
            "bridge_title_2": [a for a in self.articles if a.title in self.clauses and self.bridge(a)],
            "compare_same_2": [a for a in self.articles if a.title in self.nats],
            "compare_kind_2": [a for a in self.articles if a.title in self.kinds],
            "retry_2": [a for a in self.articles if a.title in self.nats or a.title in self.creators],
            "giveup_2": [a for a in self.articles if a.title in self.nats or a.title in self.creators],
            "propose_1": [a for a in self.articles if a.title in self.clauses],
            "propose_2": [a for a in self.articles if a.title in self.clauses and self.bridge(a)],
        }
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        """Draw as a synthesizer built with ``seed`` would, without reading the corpus again (the self-play
        bootstrap draws with a seed of its step's, from one synthesizer a run)."""
        self.rng = random.Random(seed)
        self.pools = {kind: list(pool) for kind, pool in self._unshuffled.items()}
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
    def person(self, name: str) -> Article | None:
        a = self.by_name.get(name)
        return a if a is not None and a.title in self.nats else None

    def bridge(self, a: Article) -> Article | None:
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

    def hide(self, a: Article, b: Article) -> tuple[str, str] | None:
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
        ex = self._build(
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
        return replace(ex, question=question) if ex is not None else None

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
            and not mentions(seen, final)
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
