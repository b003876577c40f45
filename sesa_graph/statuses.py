"""The one table of how a rollout can end: rollout statuses and the failure taxonomy built on them.

Every reader -- the run/eval loaders and their plots (:mod:`sesa_runs`), the eval report's status
columns (:mod:`sesa_eval.report`), the skill bank's credit rules (:mod:`sesa_graph.memory.utility`) --
takes names, descriptions and treatment from :data:`OUTCOMES`, so a new status is added here once.

A rollout's ``status`` (:data:`sesa_graph.state.RolloutStatus`, plus ``error`` for an eval rollout that
raised) says how it ended; a solver rollout's ``failure`` (``correct`` or a failure kind) says why it did
not succeed: an ending that is itself a failure (``status=True, failure=True``) is its own kind, a wrong
answer is split by whether a retrieved document held the gold.
"""

from __future__ import annotations

from typing import NamedTuple


class Outcome(NamedTuple):
    name: str
    label: str
    """Short, for legends and headings."""
    description: str
    status: bool
    """A value of a rollout's ``status``."""
    failure: bool
    """A kind of the failure taxonomy (not ``correct``, not a status that still needs judging)."""
    bank_ignores: bool = False
    """The skill bank neither credits nor blames the skills in the prompt (the policy or tool broke)."""


OUTCOMES: dict[str, Outcome] = {
    o.name: o
    for o in (
        Outcome("running", "running", "still going", status=True, failure=False),
        Outcome("answered", "answered", "gave a well-formed answer", status=True, failure=False),
        Outcome("correct", "correct", "answered correctly", status=False, failure=False),
        Outcome(
            "wrong_gold_retrieved",
            "wrong, gold retrieved",
            "answered wrongly although a retrieved document contains the gold answer",
            status=False,
            failure=True,
        ),
        Outcome(
            "wrong_gold_not_retrieved",
            "wrong, gold never retrieved",
            "answered wrongly; no retrieved document contains the gold answer",
            status=False,
            failure=True,
        ),
        Outcome(
            "wrong_retrieval_unknown",
            "wrong (docs not recorded)",
            "answered wrongly; the retrieved documents were not recorded",
            status=False,
            failure=True,
        ),
        Outcome("max_turns", "max turns", "ran out of turns", status=True, failure=True),
        Outcome("max_tokens", "max tokens", "ran out of its token budget", status=True, failure=True),
        Outcome(
            "malformed",
            "malformed",
            "broke the tag protocol (no well-formed answer)",
            status=True,
            failure=True,
            bank_ignores=True,
        ),
        Outcome(
            "search_error",
            "search error",
            "the search tool failed",
            status=True,
            failure=True,
            bank_ignores=True,
        ),
        Outcome(
            "error",
            "error",
            "the rollout raised (not a search failure)",
            status=True,
            failure=True,
            bank_ignores=True,
        ),
    )
}
"""Every outcome, in display order (correct first, then wrong answers, then endings without one)."""

FAILURE_KINDS: dict[str, str] = {o.name: o.description for o in OUTCOMES.values() if o.failure}
"""Failure kind -> description (the ``failure`` column of a solver rollout, besides ``correct``)."""

KIND_ORDER: tuple[str, ...] = ("correct", *FAILURE_KINDS)
"""The values of a solver rollout's ``failure`` column, in display order."""

FAILURE_STATUSES: tuple[str, ...] = tuple(o.name for o in OUTCOMES.values() if o.status and o.failure)
"""Statuses that are failures whatever the answer (each is its own failure kind; ``error`` may be a
search error, see :func:`sesa_runs.files.failure_kind`)."""

BANK_IGNORED_STATUSES: frozenset[str] = frozenset(n for n, o in OUTCOMES.items() if o.bank_ignores)
"""Statuses whose rollouts the skill bank leaves out of its counters."""


def label(name: str) -> str:
    """The short label of an outcome (the name itself when it is not in the table)."""
    o = OUTCOMES.get(name)
    return o.label if o else name


def describe(name: str) -> str:
    """``label: description`` of an outcome (``correct`` for a correct one; the name when unknown)."""
    o = OUTCOMES.get(name)
    if o is None:
        return name
    return o.label if name == "correct" else f"{o.label}: {o.description}"
