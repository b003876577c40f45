"""The RAG check as SSP runs it: every evidence document reaches the reader, a model match backs up exact
match, SSP's search-count rule and its 1000-character question cap."""

import asyncio
from types import SimpleNamespace

import pytest

from sesa_graph.config import ProposerConfig
from sesa_graph.rollout.proposal_checks import rag_check, static_checks
from tests.graphs.conftest import ScriptedPolicy
from tools.corpus import Doc

# three searches of three documents: a 3-hop proposal's evidence
EVIDENCE = [Doc(f"d{i}", f"Hop {i // 3 + 1} doc {i}", f"FACT{i} about hop {i // 3 + 1}.") for i in range(9)]


class NoSearch:
    name = "none"

    def search(self, queries, k=3):
        return [[] for _ in queries]


class Matcher:
    """Stands in for the run's Judge: says yes to one answer, records what it was asked."""

    def __init__(self, yes: str):
        self.yes, self.asked = yes, []

    async def judge(self, question, prediction, golds):
        self.asked.append((question, prediction, list(golds)))
        return SimpleNamespace(correct=prediction == self.yes)


def _check(tokenizer, answer, **kw):
    reader = ScriptedPolicy(tokenizer, [f"{answer}</answer>"])
    ok, got = asyncio.run(
        rag_check("Who built it?", "Gustave Eiffel", EVIDENCE, reader, NoSearch(), 0, seed=1, **kw)
    )
    return ok, got, reader.prompts[0]


def test_every_evidence_document_reaches_the_reader_unless_capped(tokenizer):
    _, _, prompt = _check(tokenizer, "Gustave Eiffel")
    assert all(f"FACT{i}" in prompt for i in range(9))  # the third hop's documents too (SSP: all of it)
    _, _, prompt = _check(tokenizer, "Gustave Eiffel", max_evidence=6)
    assert all(f"FACT{i}" in prompt for i in range(6)) and "FACT6" not in prompt


def test_a_model_match_backs_up_exact_match(tokenizer):
    assert _check(tokenizer, "Eiffel")[0] is False  # neither exact nor containing the target
    matcher = Matcher(yes="Eiffel")
    ok, got, _ = _check(tokenizer, "Eiffel", matcher=matcher)
    assert (
        ok is True and got == "Eiffel" and matcher.asked == [("Who built it?", "Eiffel", ["Gustave Eiffel"])]
    )
    matcher = Matcher(yes="Eiffel")
    assert _check(tokenizer, "Gustave Eiffel", matcher=matcher)[0] is True and matcher.asked == []
    assert _check(tokenizer, "Lyon", matcher=matcher)[0] is False


def _state(queries, question="Which engineer's company designed the lattice tower that stands in Paris?"):
    docs = [{"id": "a", "title": "A", "text": "x"}]
    return {
        "status": "answered",
        "final": question,
        "target": "Gustave Eiffel",
        "hops": 1,
        "searches": [{"query": q, "docs": docs} for q in queries],
    }


@pytest.mark.parametrize(
    "queries, hops_rule, ssp_rule",
    [
        (["tower"], None, "too_few_searches"),  # SSP wants more than one search even at one hop
        (["tower", "tower"], None, "repeated_search"),
        (["tower", "Tower "], None, None),  # SSP compares queries as written (stripped)
        (["tower", "engineer"], None, None),
    ],
)
def test_search_rules(queries, hops_rule, ssp_rule):
    assert static_checks(_state(queries), ProposerConfig(search_rule="hops")) == hops_rule
    assert static_checks(_state(queries), ProposerConfig(search_rule="ssp")) == ssp_rule


def test_ssp_question_length_caps():
    long = "Which engineer " + "really " * 120 + "built it?"
    assert len(long) < 1000 and ProposerConfig().max_chars == 1000
    assert static_checks(_state(["a", "b"], long), ProposerConfig()) == "too_many_words"
    assert static_checks(_state(["a", "b"], long), ProposerConfig(max_words=None)) is None
    assert (
        static_checks(_state(["a", "b"], long + "x" * 200), ProposerConfig(max_words=None))
        == "too_long_chars"
    )
