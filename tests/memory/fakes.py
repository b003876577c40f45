"""Test doubles for the skill memory: a scripted distiller (a PolicyClient returning canned text) and
failure records. Imported by the tests and by the crash-test child process."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable

from sesa_graph.policy.base import GenerationRequest, GenerationResult, PolicyUnavailableError

# Distinct, general skills that pass every check (no entities, not vacuous, short) and are far apart.
GOOD_SKILLS = [
    {
        "description": "Search the ruling dynasty or government of the period before naming a monarch or leader.",
        "trigger": "A question about who ruled or governed a territory at a given time.",
        "avoid": "Naming a ruler from the wrong reign.",
        "queries": ["[territory] ruler [period]"],
        "category": "temporal",
    },
    {
        "description": "Look up the team roster or club history page to connect an athlete with a season.",
        "trigger": "Sports questions linking a player to a club, league or championship.",
        "avoid": "Confusing national teams with clubs.",
        "queries": ["[club] roster [season]"],
        "category": "entity_resolution",
    },
    {
        "description": "Read chemical element or compound pages for atomic numbers, formulas and discoverers.",
        "trigger": "Chemistry questions about elements, compounds or their discovery.",
        "avoid": "Mixing up symbol letters with element names.",
        "queries": ["[element] discovered by"],
        "category": "entity_resolution",
    },
    {
        "description": "Find the river basin or mountain range page to locate geographic features before comparing heights.",
        "trigger": "Geography questions about rivers, lakes, peaks or their lengths and elevations.",
        "avoid": "Comparing lengths measured in different units.",
        "queries": ["[river] length km"],
        "category": "numeric",
    },
    {
        "description": "Check the record label and release chronology of a band's discography to order albums.",
        "trigger": "Music questions about which album or single came out earlier or later.",
        "avoid": "Using reissue dates instead of original release dates.",
        "queries": ["[band] discography"],
        "category": "temporal",
    },
    {
        "description": "Trace corporate acquisitions and mergers through the parent company's history section.",
        "trigger": "Business questions about which corporation owns a brand or subsidiary.",
        "avoid": "Reporting a former owner after a sale.",
        "queries": ["[brand] parent company"],
        "category": "decomposition",
    },
    {
        "description": "Consult the legislature's membership page to map a politician to a party and constituency.",
        "trigger": "Politics questions about a legislator's party, district or term of office.",
        "avoid": "Assuming party membership never changed.",
        "queries": ["[politician] party"],
        "category": "entity_resolution",
    },
    {
        "description": "Use taxonomy pages (genus, family, order) to relate animal or plant species before comparing traits.",
        "trigger": "Biology questions comparing two species or asking their classification.",
        "avoid": "Treating common names as unique species.",
        "queries": ["[species] family"],
        "category": "comparison",
    },
]


def skill_json(i: int) -> str:
    return json.dumps(GOOD_SKILLS[i % len(GOOD_SKILLS)])


def failure(
    i: int, *, skills: list[str] | None = None, question: str | None = None, step: int = 1, **kw
) -> dict:
    """A failed, well-formed, searching rollout on question ``i``."""
    return {
        "question": question or f"Which treaty ended war number {i} between the two kingdoms?",
        "answer": "Nowhere Accord",
        "golds": [f"Treaty {i}"],
        "searches": [f"war {i} treaty"],
        "retrieved_skill_ids": skills or [],
        "status": "answered",
        "correct": False,
        "step": step,
        **kw,
    }


def question_of(request: GenerationRequest) -> str:
    user = request.messages[-1]["content"]
    m = re.search(r"^Question: (.*)$", user, re.MULTILINE)
    return m.group(1) if m else ""


class ScriptedDistiller:
    """A PolicyClient whose completions come from ``script(question, user_message) -> text``.

    ``gate``: if given, generate waits until it is set (to hold a consolidation in flight).
    ``fail``: raise PolicyUnavailableError instead of answering.
    """

    name = "scripted"
    tokenizer = None

    def __init__(
        self,
        script: Callable[[str, str], str] | None = None,
        *,
        fail: bool = False,
        gate: threading.Event | None = None,
    ) -> None:
        self.script = script or (lambda q, user: skill_json(abs(hash(q))))
        self.fail = fail
        self.gate = gate
        self.calls: list[list[GenerationRequest]] = []

    def encode_messages(self, messages):
        """Token 'ids' that point back at the conversation, so a prompt_ids request (the masked view's
        opened reply) is scripted from its messages too."""
        self.encoded = getattr(self, "encoded", [])
        self.encoded.append(messages)
        return [-len(self.encoded)]

    def encode_text(self, text):
        return [0]

    async def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        requests = [
            r
            if r.messages is not None
            else GenerationRequest(messages=self.encoded[-r.prompt_ids[0] - 1], sampling=r.sampling)
            for r in requests
        ]
        self.calls.append(requests)
        while self.gate is not None and not self.gate.is_set():
            await asyncio.sleep(0.01)
        if self.fail:
            raise PolicyUnavailableError(
                "distiller endpoint http://127.0.0.1:9/v1 unreachable after 4 retries"
            )
        return [
            GenerationResult(
                text=self.script(question_of(r), r.messages[-1]["content"]),
                token_ids=[],
                logprobs=[],
                prompt_ids=[],
                finish_reason="stop",
            )
            for r in requests
        ]


def by_index(question: str, user: str) -> str:
    """Script: the i-th good skill for 'war number i' questions."""
    m = re.search(r"war number (\d+)", question)
    return skill_json(int(m.group(1))) if m else "no idea"


class MemoEncoder:
    """The real encoder with a per-text cache, so tests re-embedding the seeds pay for it once."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.model_name = encoder.model_name
        self.dim = encoder.dim
        self._cache: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()

    def _encode(self, kind: str, texts: list[str]):
        import numpy as np

        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self._cache))
            if missing:
                fn = self.encoder.encode_queries if kind == "q" else self.encoder.encode_documents
                for t, v in zip(missing, fn(missing)):
                    self._cache[(kind, t)] = v
            return np.array([self._cache[(kind, t)] for t in texts], dtype=np.float32).reshape(
                len(texts), self.dim
            )

    def encode_queries(self, texts: list[str]):
        return self._encode("q", texts)

    def encode_documents(self, texts: list[str]):
        return self._encode("d", texts)


def mining_distiller() -> ScriptedDistiller:
    """Factory for ``sesa bank mine --distiller fakes:mining_distiller``."""
    return ScriptedDistiller(by_index)
