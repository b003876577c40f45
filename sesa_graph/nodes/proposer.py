"""Validation of a proposed question; every failure is recorded with its reason.

Checks, in order (the first failure is the reason): the rollout produced a question; length and word
bounds; the target (normalized) does not appear in it; evidence was actually retrieved; at least two
distinct searches when hops >= 2; and the retrieval-augmented check -- a judge model answers the question
from the proposer's own evidence shuffled with distractor documents and must reach the target.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from sesa_graph import prompts, protocol
from sesa_graph.config import ProposerConfig
from sesa_graph.policy import GenerationRequest, PolicyClient, SamplingParams
from sesa_graph.scoring import contains_answer, exact_match, normalize_answer
from tools.backends import SearchBackend
from tools.corpus import Doc
from tools.render import render_docs


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
    if words > cfg.max_words:
        return "too_many_words"
    target = normalize_answer(state["target"])
    if target and f" {target} " in f" {normalize_answer(question)} ":
        return "target_in_question"
    if not evidence_docs(state.get("searches", [])):
        return "no_evidence"
    distinct = {normalize_answer(s["query"]) for s in state.get("searches", [])}
    if state.get("hops", 1) >= 2 and len(distinct) < 2:
        return "too_few_searches"
    return None


async def rag_check(
    question: str,
    target: str,
    evidence: list[Doc],
    judge: PolicyClient,
    search: SearchBackend,
    distractors: int,
    seed: int,
    doc_chars: int = 400,
) -> tuple[bool, str | None]:
    """Answer ``question`` from evidence + distractors with the judge model; pass iff it reaches the target.

    The judge answers the way the solver does -- the solver's prompt, one search already made whose results
    are these documents, then its ``<answer>`` -- so a policy that learned the rollout format (the warmed
    embedded model) reads the evidence in the form it knows rather than a second prompt style.
    """
    ids = {d.id for d in evidence}
    (candidates,) = await asyncio.to_thread(search.search, [question], distractors + len(ids) + 2)
    extra = [d for d in candidates if d.id not in ids][:distractors]
    docs = [Doc(d.id, d.title, d.text[:doc_chars]) for d in evidence[:6] + extra]
    random.Random(seed).shuffle(docs)
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
    return ok, answer


async def validate(
    state: dict[str, Any],
    cfg: ProposerConfig,
    judge: PolicyClient | None,
    search: SearchBackend,
    seed: int = 0,
) -> Validation:
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
    )
    return Validation(ok, None if ok else "rag_check_failed", answer)
