"""Skill utility: crediting retrieved skills from judged rollouts, and choosing which skills to evict.

Per rollout that had skills in its prompt (statuses as the solver graph reports them):

=============================  ============================================================
outcome                        effect on every retrieved skill
=============================  ============================================================
correct                        retrieved +1, helpful +1
status ``answered``, wrong     retrieved +1, hurt +1 (a substantive wrong answer)
max_turns, max_tokens          retrieved +1 (no answer was given: neither helped nor hurt)
malformed, search_error, error ignored entirely (the policy or the tool broke, not the skill)
=============================  ============================================================

Which statuses are ignored is the ``bank_ignores`` column of :data:`sesa_graph.statuses.OUTCOMES`.

Eviction (non-seed only): retrieved >= ``evict_min_retrieved`` and helpful - hurt < ``evict_below_score``;
then, while the bank is above its cap, the lowest-scoring non-seed skill goes (ties: the one retrieved
most often -- it had its chances -- then the oldest).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from sesa_graph.statuses import BANK_IGNORED_STATUSES

IGNORED_STATUSES = BANK_IGNORED_STATUSES  # from the one table of statuses


class Outcome(NamedTuple):
    """One judged solver rollout, as far as the skill bank cares."""

    skill_ids: tuple[str, ...] | list[str]
    correct: bool
    status: str = "answered"


class CounterDelta(NamedTuple):
    retrieved: int = 0
    helpful: int = 0
    hurt: int = 0


def classify(outcome: Outcome) -> str:
    """'helpful' | 'hurt' | 'neutral' | 'ignored' (see the module table)."""
    if outcome.status in IGNORED_STATUSES:
        return "ignored"
    if outcome.correct:
        return "helpful"
    if outcome.status == "answered":
        return "hurt"
    return "neutral"


def tally(outcomes: Iterable[Outcome | tuple]) -> tuple[dict[str, CounterDelta], Counter[str]]:
    """Aggregate a step's outcomes into one counter delta per skill id, plus counts per class."""
    acc: dict[str, list[int]] = {}
    kinds: Counter[str] = Counter()
    for o in outcomes:
        o = o if isinstance(o, Outcome) else Outcome(*o)
        kind = classify(o)
        kinds[kind] += 1
        if kind == "ignored":
            continue
        for sid in dict.fromkeys(o.skill_ids):  # a skill listed twice in one prompt counts once
            d = acc.setdefault(sid, [0, 0, 0])
            d[0] += 1
            d[1] += kind == "helpful"
            d[2] += kind == "hurt"
    return {sid: CounterDelta(*d) for sid, d in acc.items()}, kinds


class _Scored(NamedTuple):
    id: str
    retrieved: int
    helpful: int
    hurt: int
    seed: bool
    created_step: int


def select_evictions(
    skills: Mapping[str, _Scored] | Iterable, *, min_retrieved: int, below_score: int, cap: int
) -> dict[str, str]:
    """Ids to evict -> reason ('negative_utility' | 'over_capacity').

    ``skills`` are objects with id, retrieved, helpful, hurt, seed, created_step (Skill works). Pass the
    bank plus the candidates about to be admitted: a candidate (score 0, never retrieved) competes for
    the cap like everyone else, and one that comes out is simply not admitted. Seeds never go.
    """
    items = list(skills.values()) if isinstance(skills, Mapping) else list(skills)
    out: dict[str, str] = {}
    for s in items:
        if not s.seed and s.retrieved >= min_retrieved and s.helpful - s.hurt < below_score:
            out[s.id] = "negative_utility"
    over = len(items) - len(out) - cap
    if over > 0:
        rest = [s for s in items if not s.seed and s.id not in out]
        rest.sort(key=lambda s: (s.helpful - s.hurt, -s.retrieved, s.created_step))
        for s in rest[:over]:
            out[s.id] = "over_capacity"
    return out
