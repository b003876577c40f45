"""Loading benchmark datasets: name resolution, the errors bad files get, and the hygiene check."""

import json

import pytest
from eval_fakes import BENCHMARKS, write_jsonl

from sesa_eval.datasets import (
    DatasetError,
    EvalQuestion,
    check_contamination,
    hygiene_report,
    known_datasets,
    load_dataset,
    load_datasets,
    read_target_pool,
)


def test_known_datasets_paper_order_first(data_dir):
    # the paper's datasets in its column order, then the rest alphabetically
    assert list(known_datasets(data_dir)) == ["bamboogle", "alpha"]


def test_unknown_name_lists_known_ones(data_dir):
    with pytest.raises(DatasetError) as e:
        load_dataset("hotpot", data_dir)
    assert "unknown dataset 'hotpot'" in str(e.value)
    assert "Known datasets: bamboogle, alpha" in str(e.value)


def test_unknown_name_without_data_dir():
    with pytest.raises(DatasetError, match=r"no --data-dir given.*Known datasets: none"):
        load_dataset("nq", None)


def test_no_datasets_at_all(tmp_path):
    with pytest.raises(DatasetError, match="no datasets"):
        load_datasets(None, tmp_path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "x", "question": "q?"}, r"bad\.jsonl:3: row has no 'golden_answers'"),  # the case
        (
            {"id": "x", "question": "q?", "golden_answers": "Paris"},
            r":3: 'golden_answers' must be a list",
        ),  # a string
        (
            {"id": "x", "question": "q?", "golden_answers": ["", "  "]},
            r":3: 'golden_answers' has no non-empty",
        ),
        ({"id": "x", "golden_answers": ["a"]}, r":3: row has no non-empty 'question'"),
        ({"question": "q?", "golden_answers": ["a"]}, r":3: row has no 'id'"),
        (
            {"id": "1", "question": "q?", "golden_answers": ["a"]},
            r":3: id '1' already used on line 1",
        ),  # duplicate
        (["not", "an", "object"], r":3: expected a JSON object"),
    ],
)
def test_bad_row_names_file_and_line(tmp_path, row, message):
    p = tmp_path / "bad.jsonl"
    good = {"id": "1", "question": "First?", "golden_answers": ["a"]}
    p.write_text(json.dumps(good) + "\n\n" + json.dumps(row) + "\n")  # blank line 2 still counts
    with pytest.raises(DatasetError, match=message):
        load_dataset(str(p), None)


def test_invalid_json_line(tmp_path):
    p = tmp_path / "broken.jsonl"
    p.write_text('{"id": "1", "question": "q", "golden_answers": ["a"]}\n{"id": 2,\n')
    with pytest.raises(DatasetError, match=r"broken\.jsonl:2: not valid JSON"):
        load_dataset(str(p), None)


def test_limit_reads_first_rows_only(tmp_path):
    p = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"id": "1", "question": "a?", "golden_answers": ["x"]},
            {"id": "2", "question": "b?", "golden_answers": ["y"]},
        ],
    )
    p.write_text(p.read_text() + "not json at all\n")  # beyond the limit: never read
    qs = load_dataset(str(p), None, limit=2)
    assert [q.id for q in qs] == ["1", "2"]
    assert qs[0] == EvalQuestion("d", "1", "a?", ("x",))
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_dataset(str(p), None)


def test_golds_are_stripped_and_deduplicated(tmp_path):
    p = write_jsonl(
        tmp_path / "d.jsonl", [{"id": 7, "question": " q? ", "golden_answers": [" A ", "A", "B"]}]
    )
    (q,) = load_dataset(str(p), None)
    assert (q.id, q.question, q.golds) == ("7", "q?", ("A", "B"))


def test_hf_dataset_offline_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetError, match="need the network"):
        load_dataset("hf:RUC-NLPIR/FlashRAG_datasets:nq:test", None)


def test_same_name_twice(data_dir):
    with pytest.raises(DatasetError, match="given twice"):
        load_datasets(["alpha", str(data_dir / "alpha.jsonl")], data_dir)


def test_shared_benchmarks_load():
    data = load_datasets(None, BENCHMARKS, limit=2)
    assert list(data) == ["nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "musique", "bamboogle"]
    assert all(len(v) == 2 and v[0].golds for v in data.values())


# ---- hygiene ---------------------------------------------------------------------------------------------

Q = [
    EvalQuestion("nq", "1", "Who wrote the novel Dracula?", ("Bram Stoker",)),
    EvalQuestion("nq", "2", "What is the capital of Peru?", ("Lima",)),
    EvalQuestion("nq", "3", "How tall is the Eiffel Tower?", ("330 m",)),
]


def test_contamination_exact_and_normalized():
    texts = [
        ("pool:1", "Example: Who wrote the novel Dracula? Answer it."),  # verbatim substring: exact
        ("pool:2", "what is THE capital of peru"),  # same words after normalization only
        ("pool:3", "How tall is the Eiffel Tower in feet?"),  # contains the question (normalized): a hit
    ]
    sec = check_contamination(Q, texts, "pool")
    kinds = {h.id: h.match for h in sec.hits}
    assert kinds["1"] == "exact" and kinds["2"] == "normalized"
    assert kinds["3"] == "normalized"
    assert (sec.exact, sec.normalized) == (1, 3)


def test_contamination_whole_words_only():
    sec = check_contamination(
        [EvalQuestion("x", "1", "capital of Peru", ("Lima",))], [("t", "the capitals of Peruvia")], "t"
    )
    assert sec.normalized == 0  # substrings of words do not count


def test_target_pool_formats(tmp_path):
    p = tmp_path / "pool.jsonl"
    p.write_text(
        json.dumps(
            {
                "ground_truth": "Bram Stoker",
                "search_turns": 2,
                "sys_question_example": "Who wrote the novel Dracula?",
            }
        )
        + "\nLima\n"
    )
    texts = read_target_pool(p)
    assert [t for _, t in texts] == ["Who wrote the novel Dracula?", "Bram Stoker", "Lima"]
    rep = hygiene_report(Q, [p], None)
    assert rep["sections"][0]["exact"] == 1 and not rep["clean"]
    assert rep["not_checked"] == ["skill bank (no --bank)"]


def test_hygiene_against_skills():
    from sesa_graph.memory.skill import Skill

    skills = [
        Skill(
            id="d1-x",
            description="For 'what is the capital of Peru', search the country page.",
            trigger="Capital questions.",
        ),
        Skill(id="seed-a", description="Search the author page.", trigger="Who wrote a book."),
    ]
    rep = hygiene_report(Q, [], skills, bank_label="bank v3")
    (sec,) = rep["sections"]
    assert (sec["texts"], sec["exact"], sec["normalized"]) == (2, 0, 1)
    assert sec["hits"][0]["source"] == "d1-x"
    assert rep["not_checked"] == ["target pool (give --target-pool)"]


def test_missing_pool_file(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        hygiene_report(Q, [tmp_path / "nope.jsonl"])


def test_embedded_target_pool_has_no_benchmark_questions():
    qs = [q for qs in load_datasets(None, BENCHMARKS, limit=20).values() for q in qs]
    rep = hygiene_report(qs, ["embedded"])
    (sec,) = rep["sections"]
    assert sec["texts"] > 1000 and sec["normalized"] == 0 and rep["clean"]
