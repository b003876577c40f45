"""The proposer's budget and the RAG check's distractors: never the evidence, never a document that hands
the reader the target, cut to the loop's doc_chars, drawn from unrelated queries ('random') or from the
question's own hits ('question')."""

import asyncio
import random

from graphs.propose import ProposeContext, propose
from sesa_graph.config import ProposerConfig
from sesa_graph.rollout.loop import proposer_spec
from sesa_graph.rollout.proposal_checks import pick_distractors, rag_check
from tests.graphs.conftest import ScriptedPolicy
from tools.corpus import Doc

PAD = " filler" * 80  # every document is longer than any doc_chars used here
TAIL = "ZZTAIL"  # past the cut: must never reach the reader


def _doc(id_: str, text: str) -> Doc:
    return Doc(id_, id_, text + PAD + TAIL)


CORPUS = [
    _doc("Gustave Eiffel", "Gustave Eiffel was a French civil engineer born in Dijon."),
    _doc("Eiffel Tower", "The Eiffel Tower is a lattice tower in Paris designed by Eiffel's company."),
    _doc("Dijon", "Dijon is a city in eastern France."),
    _doc("Mustard", "Dijon mustard originated in 1856."),
    _doc("Burgundy", "Burgundy is a region; its capital is DIJON."),  # the target, other case
    _doc("Lyon", "Lyon is the third-largest city of France."),
    _doc("Nile", "The Nile is a river in Africa."),
    _doc("Everest", "Everest is the highest mountain."),
    _doc("Mozart", "Mozart was a composer born in Salzburg."),
    _doc("Engineer", "An engineer designs structures such as a tower."),
]


class KeywordSearch:
    """Documents whose title or text shares a word with the query, in corpus order; records each call."""

    name = "keyword"

    def __init__(self, docs=CORPUS):
        self.docs = docs
        self.calls: list[tuple[list[str], int]] = []

    def search(self, queries, k=3):
        self.calls.append((list(queries), k))
        return [
            [d for d in self.docs if any(w.lower() in (d.title + " " + d.text).lower() for w in q.split())][
                :k
            ]
            for q in queries
        ]


EVIDENCE_IDS = {"Gustave Eiffel", "Eiffel Tower"}


def _bad(d: Doc) -> bool:
    return d.id in EVIDENCE_IDS or "dijon" in (d.title + d.text).lower()


def test_proposer_spec_uses_the_configured_budget():
    assert proposer_spec(ProposerConfig()).max_total_tokens == 8192
    spec = proposer_spec(ProposerConfig(max_total_tokens=3000, max_turns=4), search_k=5, doc_chars=120)
    assert (spec.max_total_tokens, spec.max_turns, spec.search_k, spec.doc_chars) == (3000, 4, 5, 120)


def test_random_distractors_come_from_unrelated_queries_and_never_bear_the_target():
    queries = ["Dijon", "Lyon", "Nile", "Everest", "Mozart", "Mustard", "Burgundy", "dijon!"]
    search = KeywordSearch()
    for seed in range(20):
        got = pick_distractors(
            "Where was the tower's engineer born?",
            "Dijon",
            EVIDENCE_IDS,
            search,
            3,
            random.Random(seed),
            "random",
            queries,
        )
        assert len(got) == 3 and len({d.id for d in got}) == 3
        assert not any(_bad(d) for d in got)
    asked = [q for qs, k in search.calls for q in qs]
    assert "Dijon" not in asked and "dijon!" not in asked  # the target itself is no unrelated query
    assert all(k == 2 for _, k in search.calls)
    # the rng decides which unrelated queries are drawn
    draws = {
        tuple(
            d.id
            for d in pick_distractors(
                "q", "Dijon", EVIDENCE_IDS, KeywordSearch(), 2, random.Random(s), "random", queries
            )
        )
        for s in range(20)
    }
    assert len(draws) > 1


def test_without_queries_random_falls_back_to_the_questions_hits():
    search = KeywordSearch()
    got = pick_distractors(
        "Which engineer of the tower was born in the mustard city?",
        "Dijon",
        EVIDENCE_IDS,
        search,
        4,
        random.Random(0),
        "random",
        (),
    )
    assert search.calls and search.calls[0][0] == [
        "Which engineer of the tower was born in the mustard city?"
    ]
    assert got and not any(_bad(d) for d in got)
    assert [d.id for d in got] == [d.id for d in CORPUS if not _bad(d) and d.id in {x.id for x in got}]


def test_question_source_drops_documents_that_contain_the_target():
    # 'born in the city' hits Gustave Eiffel (evidence), Dijon, Mustard, Burgundy (all bear the target) first
    got = pick_distractors(
        "Which city is the engineer born in?",
        "Dijon",
        EVIDENCE_IDS,
        KeywordSearch(),
        3,
        random.Random(0),
        "question",
    )
    assert len(got) == 3 and not any(_bad(d) for d in got)


def test_rag_check_cuts_every_document_to_doc_chars(tokenizer):
    judge = ScriptedPolicy(tokenizer, ["<answer>Dijon</answer>"])
    evidence = [CORPUS[0]]
    ok, answer = asyncio.run(
        rag_check(
            "Where was the engineer of the lattice tower born?",
            "Dijon",
            evidence,
            judge,
            KeywordSearch(),
            3,
            seed=1,
            doc_chars=90,
            source="random",
            distractor_queries=["Nile", "Everest", "Mozart", "Lyon"],
        )
    )
    assert ok and answer == "Dijon"
    prompt = judge.prompts[0]
    assert "born in Dijon" in prompt and TAIL not in prompt and "filler filler" * 10 not in prompt
    assert sum(t in prompt for t in ("Nile", "Everest", "Mozart", "Lyon")) == 3
    assert "Burgundy" not in prompt and "mustard" not in prompt.lower()


def test_propose_graph_passes_doc_chars_and_distractor_queries(tokenizer):
    script = [
        "<search>Gustave Eiffel</search>",
        "<question>In which city was the engineer whose company designed the lattice tower born?</question>",
    ]
    judge = ScriptedPolicy(tokenizer, ["<answer>Dijon</answer>"])
    pc = ProposerConfig(max_turns=4, rag_distractors=2)
    ctx = ProposeContext(
        ScriptedPolicy(tokenizer, script),
        KeywordSearch(),
        proposer_spec(pc, search_k=1, doc_chars=100),
        checks=pc,
        judge=judge,
        distractor_queries=["Nile", "Everest", "Mozart"],
    )
    out = asyncio.run(propose("Dijon", 1, ctx))
    assert out["valid"] is True
    prompt = judge.prompts[0]
    assert TAIL not in prompt and sum(t in prompt for t in ("Nile", "Everest", "Mozart")) == 2
    assert ctx.search.calls[-1][1] == 2  # the distractor searches, k=2 per unrelated query
