"""Test doubles for the eval harness: a scripted solver policy, an in-memory search backend, a hashing
encoder for skill banks, and a JSONL writer. (A uniquely named module: several test folders have a
top-level ``conftest``.)"""

import asyncio
import hashlib
import json
import os
import re

import numpy as np

from sesa_graph.policy.base import GenerationResult, PolicyUnavailableError
from tools.corpus import Doc

BENCHMARKS = "/work/shared/data/benchmarks"
USER_SESA_HOME = os.environ.get("SESA_HOME")  # read at import, before the conftest fixture replaces it


def hedging_misses(*right: str):
    """An answer script: the text after "answer:" when it is one of ``right``, else that text hedged ("maybe
    Saturn"). A bare scripted miss repeats the question's own words, which the judge rules an echo without
    asking its model; tests of the judge model need misses it has to grade."""

    def answer(question: str, user: str) -> str:
        said = question.split("answer:")[-1].strip(" ?")
        return said if said in right else f"maybe {said}"

    return answer


class ScriptedSolver:
    """A PolicyClient whose prompts are opaque ids that remember their messages.

    ``answer(question, user_message) -> str`` decides each rollout's reply (default: the text after
    "answer:" in the question, so datasets can script right and wrong answers). ``search_first`` makes
    the first turn a search. ``fail_after`` raises PolicyUnavailableError after that many calls.
    """

    name = "scripted"
    tokenizer = None

    def __init__(self, answer=None, *, search_first=False, fail_after=None, delay=0.0):
        self.answer = answer or (
            lambda q, user: q.split("answer:")[-1].strip(" ?") if "answer:" in q else "no idea"
        )
        self.search_first = search_first
        self.fail_after = fail_after
        self.delay = delay
        self.messages: dict[int, list[dict]] = {}
        self.calls = 0
        self.solved: list[str] = []  # questions whose first turn was generated
        self.max_batch_seen = 0
        self._inflight = 0

    def encode_messages(self, messages):
        i = len(self.messages) + 1
        self.messages[i] = messages
        return [i]

    def encode_text(self, text):
        return [0]

    async def generate(self, requests):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise PolicyUnavailableError("policy endpoint http://dead:1/v1 failed after 3 attempts: refused")
        self._inflight += 1
        self.max_batch_seen = max(self.max_batch_seen, self._inflight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self._inflight -= 1
        out = []
        for r in requests:
            if r.messages is not None:  # a judge request
                out.append(GenerationResult("Correct", [1], [0.0], [], "eos"))
                continue
            msgs = self.messages[r.prompt_ids[0]]
            user = msgs[-1]["content"]
            question = user.split("Question:")[-1].strip()
            first = len(r.prompt_ids) == 1
            if first:
                self.solved.append(question)
            if first and self.search_first:
                text = f"<search>{question}</search>"
            else:
                text = f"<answer>{self.answer(question, user)}</answer>"
            out.append(GenerationResult(text, [1, 2], [-0.1, -0.2], list(r.prompt_ids), "stop"))
        return out


class ListSearch:
    """A search backend over a few fixed docs; ``fail=True`` raises on every call."""

    name = "list"

    def __init__(self, fail=False):
        self.fail = fail
        self.calls = 0

    def search(self, queries, k=3):
        self.calls += 1
        if self.fail:
            raise ConnectionError("retrieval server http://dead:9 refused the connection")
        return [[Doc("d1", "Paris", "Paris is the capital of France.", 1.0)][:k] for _ in queries]


class HashEncoder:
    """Deterministic bag-of-words embeddings (no model download): shared words -> high cosine."""

    dim = 64

    def _one(self, text):
        v = np.zeros(self.dim, np.float32)
        for w in re.findall(r"[a-z]+", text.lower()):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def encode_queries(self, texts):
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    encode_documents = encode_queries


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
