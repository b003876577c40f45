"""The synthesized example record (a synthetic rollout, segment by segment, which the warm-up trains on and
the self-play bootstrap takes its question from) and the text of its turns and observations, exactly as
the agent loop renders them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sesa_graph import protocol
from tools.corpus import Doc
from tools.render import render_docs

Role = Literal["solver", "proposer"]
Part = Literal["turn", "miss", "env"]


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
    question: str | None = None  # the solver's question as asked, so a caller never parses the prompt for it

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
    elsewhere, e.g. ``training.warmup.distiller_data``)."""
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
