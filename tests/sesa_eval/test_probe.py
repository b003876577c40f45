"""The held-out split, the exclusions that keep it held out, and the frozen probe set."""

import json

import pytest

import sesa_graph.corpus.articles as corpus_articles
from sesa_eval.datasets import PROBE_FILE, check_probe_split, hygiene_report, load_dataset
from sesa_eval.probe import GENERATOR
from sesa_eval.probe.facts import DOC_CHARS
from sesa_eval.probe.generate import FORMS, render, rows
from sesa_graph.corpus import targets
from sesa_graph.corpus.articles import all_articles, load_articles
from sesa_graph.corpus.heldout import SPLIT_VERSION, compute_split, held_out_titles, is_held_out
from sesa_graph.scoring import contains_answer
from tools.corpus import load_embedded_corpus

ROWS = [json.loads(line) for line in PROBE_FILE.read_text("utf-8").splitlines()]
TEXT = {a.title: a.text for a in all_articles()}


def test_split_is_stable():
    # a change here is a new split: bump SPLIT_VERSION and rebuild the probe set and the warm model
    assert SPLIT_VERSION == "heldout-v1"
    held = ("Berlin", "Kazakhstan", "Moby-Dick", "Frédéric Chopin", "Paris")
    assert [t for t in held if is_held_out(t)] == list(held)
    assert not any(
        is_held_out(t) for t in ("Albert Einstein", "United States", "Europe", "Nineteen Eighty-Four")
    )
    assert 1000 <= len(held_out_titles()) <= 1400  # about 11% of the 10k articles


def test_frozen_split_is_what_compute_split_gives():
    assert compute_split((d.title, d.text) for d in load_embedded_corpus()) == sorted(held_out_titles())


def test_target_pool_never_draws_a_held_out_article():
    pool = targets.build_embedded_pool()
    assert len(pool) > 5000
    assert not {t.answer for t in pool} & held_out_titles()


def test_warmup_articles_leave_held_out_ones_out():
    titles = {a.title for a in load_articles()}
    assert len(titles) > 8000 and not titles & held_out_titles()


def test_every_warmup_kind_draws_from_the_warmup_articles(monkeypatch):
    from training.questions import synth

    sample = load_articles()[::25]
    monkeypatch.setattr(synth, "load_articles", lambda: list(sample))
    s = synth.Synthesizer(search=None)
    allowed = {a.title for a in sample}
    # answers, bridges (by_name), comparison partners and misses all come from these
    assert {a.title for a in s.articles} == allowed
    assert {a.title for a in s.by_name.values()} <= allowed
    for kind, pool in s.pools.items():
        assert {a.title for a in pool} <= allowed, kind
    assert sum(map(len, s.pools.values())) > 100


def test_frozen_probe_set_shape():
    assert len(ROWS) >= 300
    hops = [r["hops"] for r in ROWS]
    assert {h: hops.count(h) for h in (1, 2, 3)} == {1: 110, 2: 110, 3: 110}
    assert len({r["id"] for r in ROWS}) == len(ROWS)
    for r in ROWS:
        assert r["generator"] == GENERATOR and r["split"] == SPLIT_VERSION
        assert (r["hops"], r["seen_form"]) == FORMS[r["form"]][:2]
        assert len(r["articles"]) == len(set(r["articles"])) == r["hops"]


def test_every_probe_answer_is_readable_in_its_held_out_article():
    for r in ROWS:
        assert all(is_held_out(t) for t in r["articles"]), r["id"]
        bearing = TEXT[r["articles"][-1]][:DOC_CHARS]
        assert contains_answer(bearing, r["golden_answers"]), r["id"]
        assert not contains_answer(r["question"], r["golden_answers"]), r["id"]


@pytest.mark.slow
def test_regenerating_gives_the_frozen_file():
    assert render(rows()) == PROBE_FILE.read_text("utf-8")


def test_probe_name_is_the_packaged_file_even_with_a_data_dir(tmp_path):
    (tmp_path / "probe.jsonl").write_text('{"id": "x", "question": "q?", "golden_answers": ["a"]}\n')
    qs = load_dataset("probe", tmp_path)
    assert len(qs) == len(ROWS) and qs[0].dataset == "probe" and qs[0].id == ROWS[0]["id"]


def test_hygiene_checks_the_split_for_probe_questions():
    rep = hygiene_report(load_dataset("probe"))
    (sec,) = rep["sections"]
    assert sec["source"] == f"probe held-out split {SPLIT_VERSION}"
    assert sec["texts"] == len(ROWS) and sec["normalized"] == 0 and rep["clean"]


def test_hygiene_fails_loudly_when_the_pool_exclusion_is_broken(monkeypatch, caplog):
    monkeypatch.setattr(targets, "is_held_out", lambda title: False)
    sec = check_probe_split(load_dataset("probe", limit=20))
    assert sec.normalized == 20 and "in the target pool" in sec.hits[0].match
    assert "held-out exclusion is broken" in caplog.text


def test_hygiene_fails_when_the_warmup_exclusion_is_broken(monkeypatch):
    monkeypatch.setattr(corpus_articles, "is_held_out", lambda title: False)
    corpus_articles._training_articles.cache_clear()
    try:
        sec = check_probe_split(load_dataset("probe", limit=5))
    finally:
        corpus_articles._training_articles.cache_clear()
    assert sec.normalized == 5 and all("warm-up" in h.match for h in sec.hits)
