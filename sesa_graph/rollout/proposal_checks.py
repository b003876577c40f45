"""Validation of a proposed question; every failure is recorded with its reason.

Checks, in order (the first failure is the reason): the rollout produced a question; length and word
bounds; the target (normalized) does not appear in it; evidence was actually retrieved; enough searches
(``ProposerConfig.search_rule``: two distinct ones at hops >= 2, or SSP's two or more, none repeated); and
the retrieval-augmented check -- a fixed reader model answers the question from the proposer's own
evidence (all of it unless ``rag_evidence_docs`` caps it) shuffled with distractor documents, and its
answer must match the target: exact match or containment, else (``rag_model_match``, as SSP) the run's
LLM judge. Distractors never carry the target (see ``pick_distractors``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sesa_graph import prompts, protocol
from sesa_graph.config import ProposerConfig
from sesa_graph.policy import GenerationRequest, PolicyClient, SamplingParams
from sesa_graph.scoring import contains_answer, exact_match, normalize_answer
from tools.backends import SearchBackend
from tools.corpus import Doc
from tools.render import render_docs

if TYPE_CHECKING:
    from sesa_graph.rollout.judge import Judge


@dataclass
class Validation:
    valid: bool
    reason: str | None = None
    rag_answer: str | None = None


def evidence_docs(searches: list[dict[str, Any]]) -> list[Doc]:
    """Distinct documents the proposer retrieved, in the order it first saw them."""
    seen: dict[str, Doc] = {}
    for s in searches:
        for d in s["docs"]:
            seen.setdefault(d["id"], Doc(d["id"], d["title"], d["text"], d.get("score", 0.0)))
    return list(seen.values())


def static_checks(state: dict[str, Any], cfg: ProposerConfig) -> str | None:
    """The reason a proposal fails before any model is asked, or None."""
    if state.get("status") != "answered" or not state.get("final"):
        return f"no_question:{state.get('status')}"
    question = state["final"]
    if len(question) > cfg.max_chars:
        return "too_long_chars"
    words = len(question.split())
    if words < cfg.min_words:
        return "too_few_words"
    if cfg.max_words is not None and words > cfg.max_words:
        return "too_many_words"
    target = normalize_answer(state["target"])
    if target and f" {target} " in f" {normalize_answer(question)} ":
        return "target_in_question"
    if not evidence_docs(state.get("searches", [])):
        return "no_evidence"
    return search_count_reason([s["query"] for s in state.get("searches", [])], state.get("hops", 1), cfg)


def search_count_reason(queries: list[str], hops: int, cfg: ProposerConfig) -> str | None:
    """'too_few_searches' / 'repeated_search' when the queries break ``cfg.search_rule``, else None."""
    if cfg.search_rule == "ssp":  # SSP: more than one query, and no query twice (compared as written)
        stripped = [q.strip() for q in queries]
        if len(stripped) < 2:
            return "too_few_searches"
        return "repeated_search" if len(set(stripped)) < len(stripped) else None
    distinct = {normalize_answer(q) for q in queries}
    return "too_few_searches" if hops >= 2 and len(distinct) < 2 else None


def _bears_target(doc: Doc, target: str) -> bool:
    # the whole document, not only the part the reader sees: a passage about the target is too close a hint
    return contains_answer(f"{doc.title} {doc.text}", [target])


def pick_distractors(
    question: str,
    target: str,
    evidence_ids: Collection[str],
    search: SearchBackend,
    n: int,
    rng: random.Random,
    source: str = "random",
    queries: Sequence[str] = (),
    per_query: int = 2,
    rounds: int = 3,
) -> list[Doc]:
    """``n`` distractor documents for the RAG check, none of them the proposer's evidence or bearing the target.

    'random': documents retrieved for unrelated ``queries`` (other targets of the pool), ``n`` of them drawn
    with ``rng`` per round (one document per query, for variety), for at most ``rounds`` rounds; whatever is
    still missing then, or everything when no queries are given, comes from the question's own hits
    ('question'). A distractor that mentions the target would let the reader answer without the evidence,
    so the check would no longer test that the evidence supports the question.
    """
    if n <= 0:
        return []
    picked: dict[str, Doc] = {}

    def ok(d: Doc) -> bool:
        return d.id not in evidence_ids and d.id not in picked and not _bears_target(d, target)

    if source == "random":
        norm = normalize_answer(target)
        pool = list(dict.fromkeys(q for q in queries if q.strip() and normalize_answer(q) != norm))
        rng.shuffle(pool)
        for r in range(rounds):
            batch = pool[r * n : (r + 1) * n]
            if not batch or len(picked) >= n:
                break
            for hits in search.search(batch, per_query):
                d = next((d for d in hits if ok(d)), None)
                if d is not None and len(picked) < n:
                    picked[d.id] = d
    if len(picked) < n:
        (hits,) = search.search([question], 2 * n + len(evidence_ids) + 2)
        for d in hits:
            if len(picked) >= n:
                break
            if ok(d):
                picked[d.id] = d
    return list(picked.values())


async def rag_check(
    question: str,
    target: str,
    evidence: list[Doc],
    judge: PolicyClient,
    search: SearchBackend,
    distractors: int,
    seed: int,
    doc_chars: int = 400,
    source: str = "question",
    distractor_queries: Sequence[str] = (),
    max_evidence: int | None = None,
    matcher: Judge | None = None,
) -> tuple[bool, str | None]:
    """Answer ``question`` from evidence + distractors with the judge model; pass iff it reaches the target.

    The judge answers the way the solver does -- the solver's prompt, one search already made whose results
    are these documents, then its ``<answer>`` -- so a policy that learned the rollout format (the warmed
    embedded model) reads the evidence in the form it knows rather than a second prompt style. Every
    document is cut to ``doc_chars``, as the solver's search results are. ``max_evidence`` caps the
    evidence documents (None: all). An answer that is neither an exact match nor contains the target is
    put to ``matcher`` (an LLM judge), when given.
    """
    # the seed alone is the same for every proposal of a run; with the question each draws its own distractors
    rng = random.Random(f"{seed}:{question}")
    extra = await asyncio.to_thread(
        pick_distractors,
        question,
        target,
        {d.id for d in evidence},
        search,
        distractors,
        rng,
        source,
        distractor_queries,
    )
    kept = evidence if max_evidence is None else evidence[:max_evidence]
    docs = [Doc(d.id, d.title, d.text[:doc_chars]) for d in kept + extra]
    rng.shuffle(docs)
    forced = protocol.open_tag("answer")
    observation = (
        protocol.render_search(question)
        + protocol.render_information(render_docs(docs), notice=prompts.FINAL_TURN_FORCED_NOTICE)
        + forced
    )
    prompt_ids = judge.encode_messages(prompts.solver_messages(question, None, max_turns=2))
    (res,) = await judge.generate(
        [
            GenerationRequest(
                prompt_ids=prompt_ids + judge.encode_text(observation),
                sampling=SamplingParams(max_tokens=32, temperature=0.0, stop=("</answer>",)),
            )
        ]
    )
    answer = protocol.final_answer(forced + res.text) or res.text.replace("</answer>", "").strip()
    ok = bool(answer) and (exact_match(answer, [target]) == 1.0 or contains_answer(answer, [target]))
    if not ok and answer and matcher is not None:
        ok = (await matcher.judge(question, answer, [target])).correct
    return ok, answer


async def validate(
    state: dict[str, Any],
    cfg: ProposerConfig,
    judge: PolicyClient | None,
    search: SearchBackend,
    seed: int = 0,
    doc_chars: int = 400,
    distractor_queries: Sequence[str] = (),
    matcher: Judge | None = None,
) -> Validation:
    """The checks in order; ``doc_chars`` is the proposer loop's (its evidence was cut to it already),
    ``distractor_queries`` feed the 'random' distractor source and ``matcher`` is the run's judge (used
    with ``cfg.rag_model_match``)."""
    reason = static_checks(state, cfg)
    if reason:
        return Validation(False, reason)
    if not cfg.rag_check or judge is None:
        return Validation(True)
    ok, answer = await rag_check(
        state["final"],
        state["target"],
        evidence_docs(state["searches"]),
        judge,
        search,
        cfg.rag_distractors,
        seed,
        doc_chars=doc_chars,
        source=cfg.rag_distractor_source,
        distractor_queries=distractor_queries,
        max_evidence=cfg.rag_evidence_docs,
        matcher=matcher if cfg.rag_model_match else None,
    )
    return Validation(ok, None if ok else "rag_check_failed", answer)
