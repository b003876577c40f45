import json

import pytest

from tools.corpus import (
    Doc,
    corpus_hash,
    join_contents,
    load_corpus,
    load_embedded_corpus,
    load_jsonl_corpus,
    split_contents,
)


def write_jsonl(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_good_file(tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            json.dumps({"id": 0, "contents": '"Eiffel Tower"\nA lattice tower.\nSecond line.'}),
            "",  # blank lines are skipped
            json.dumps({"id": "7", "contents": '"No text"'}),
        ],
    )
    assert load_jsonl_corpus(path) == [
        Doc("0", "Eiffel Tower", "A lattice tower.\nSecond line."),
        Doc("7", "No text", ""),
    ]
    assert load_corpus(str(path)) == load_jsonl_corpus(path)


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",  # broken JSON
        json.dumps({"id": 1}),  # no contents
        json.dumps(["id", "contents"]),  # not an object
    ],
)
def test_jsonl_bad_line_names_file_and_line(tmp_path, bad):
    path = write_jsonl(tmp_path / "bad.jsonl", [json.dumps({"id": 0, "contents": '"A"\ntext'}), bad])
    with pytest.raises(ValueError, match=r"bad\.jsonl:2:"):
        load_jsonl_corpus(path)


def test_load_corpus_missing_path():
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_corpus("nope.jsonl")


def test_embedded_corpus():
    docs = load_corpus("embedded")
    assert len(docs) == 10033
    assert [d.title for d in docs] == sorted(d.title for d in docs)
    eiffel = next(d for d in docs if d.id == "Eiffel Tower")
    assert eiffel.title == "Eiffel Tower" and "Paris" in eiffel.text
    assert load_embedded_corpus() == docs  # cached: same content, fresh list
    assert load_embedded_corpus() is not docs


def test_corpus_hash_stable_and_sensitive(small_docs):
    h = corpus_hash(small_docs)
    assert h == corpus_hash(list(small_docs)) and len(h) == 16
    assert corpus_hash(small_docs[::-1]) != h
    changed = [Doc(small_docs[0].id, small_docs[0].title, small_docs[0].text + "!"), *small_docs[1:]]
    assert corpus_hash(changed) != h


def test_contents_round_trip(small_docs):
    for d in small_docs:
        assert split_contents(join_contents(d)) == (d.title, d.text)
