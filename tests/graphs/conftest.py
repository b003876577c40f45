"""A scripted policy (the point of these unit tests: exact control over what the model says) that uses the
real SmolLM2 tokenizer, and a tiny in-memory search backend."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sesa_graph.policy import GenerationRequest, GenerationResult
from tools.corpus import Doc


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    from sesa_graph.embedded import resolve_policy_model

    return AutoTokenizer.from_pretrained(resolve_policy_model("embedded"))


class ScriptedPolicy:
    """Answers each request with ``script(prompt_text, call_index)``; records every prompt it saw."""

    def __init__(self, tokenizer, script: Callable[[str, int], str] | list[str]):
        self.name = "scripted"
        self.tokenizer = tokenizer
        self.script = script
        self.prompts: list[str] = []
        self.calls = 0

    def encode_messages(self, messages):
        out = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    def encode_text(self, text):
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    async def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for r in requests:
            ids = r.prompt_ids if r.prompt_ids is not None else self.encode_messages(r.messages)
            text = self.tokenizer.decode(ids)
            self.prompts.append(text)
            reply = (
                self.script[self.calls % len(self.script)]
                if isinstance(self.script, list)
                else self.script(text, self.calls)
            )
            self.calls += 1
            toks = self.encode_text(reply)
            out.append(GenerationResult(reply, toks, [-0.5] * len(toks), list(ids), "stop"))
        return out


class ListSearch:
    name = "list"

    def __init__(self, docs: list[Doc], fail: bool = False):
        self.docs = docs
        self.fail = fail
        self.queries: list[str] = []

    def search(self, queries, k=3):
        if self.fail:
            raise ConnectionError("search backend down")
        self.queries.extend(queries)
        return [
            [d for d in self.docs if any(w.lower() in (d.title + d.text).lower() for w in q.split())][:k]
            for q in queries
        ]


DOCS = [
    Doc(
        "Eiffel Tower",
        "Eiffel Tower",
        "The Eiffel Tower is a lattice tower in Paris designed by Gustave Eiffel's company.",
    ),
    Doc("Paris", "Paris", "Paris is the capital of France."),
    Doc("Gustave Eiffel", "Gustave Eiffel", "Gustave Eiffel was a French civil engineer born in Dijon."),
    Doc("Dijon", "Dijon", "Dijon is a city in eastern France, capital of the Côte-d'Or department."),
    Doc("Mustard", "Mustard", "Dijon mustard originated in 1856 in Dijon."),
    Doc("Lyon", "Lyon", "Lyon is the third-largest city of France."),
]


@pytest.fixture
def search():
    return ListSearch(DOCS)
