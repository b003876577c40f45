"""Probe v2: names without joins, questions readable and unambiguous at the eval's cut, the cut recorded
and checked, determinism, and the warm model's split checked by a probe eval."""

import json

import pytest

from sesa_eval.datasets import (
    PROBE_FILES,
    DatasetError,
    check_probe_cut,
    check_warm_split,
    hygiene_report,
    load_dataset,
    probe_cut,
)
from sesa_eval.probe import GENERATOR_V2
from sesa_eval.probe.audit import audit
from sesa_eval.probe.generate import render
from sesa_eval.probe.generate_v2 import FORMS, default_doc_chars, rows
from sesa_eval.probe.names import mentions
from sesa_graph.corpus.articles import all_articles
from sesa_graph.corpus.heldout import SPLIT_VERSION, is_held_out
from sesa_graph.scoring import contains_answer

FILE = PROBE_FILES["probe-v2"]
ROWS = [json.loads(line) for line in FILE.read_text("utf-8").splitlines()]
V1 = [json.loads(line) for line in PROBE_FILES["probe"].read_text("utf-8").splitlines()]
TEXT = {a.title: a.text for a in all_articles()}


def test_names_never_join_across_and_or_a_sentence_end():
    text = "It borders Israel and Lebanon. Tonga. The U.S. Navy sailed to the Bay of Bengal"
    assert [m.text for m in mentions(text, len(text))] == [
        "Israel",
        "Lebanon",
        "Tonga",
        "U.S",  # a dot before a space ends a name: a miss, never a join
        "Navy",
        "Bay of Bengal",
    ]
    # a word the window cuts in two is no name
    assert [m.text for m in mentions("Visit Kazakhstan", 12)] == []


def test_the_file_records_the_cut_the_default_run_evaluates_at():
    assert default_doc_chars() == 240 == probe_cut("probe-v2")
    assert probe_cut("probe") is None  # v1 predates the recorded cut
    assert {r["doc_chars"] for r in ROWS} == {240}


def test_shape_and_readability_at_the_cut():
    assert len(ROWS) >= 400 and len({r["id"] for r in ROWS}) == len(ROWS)
    headline = [r for r in ROWS if not r["layout"]]
    assert len(headline) > len(ROWS) / 2  # the layout-bound forms are the minority, scored apart
    for r in ROWS:
        assert r["generator"] == GENERATOR_V2 and r["split"] == SPLIT_VERSION
        assert (r["hops"], r["seen_form"], r["layout"]) == FORMS[r["form"]]
        assert len(r["articles"]) == len(set(r["articles"])) == max(r["hops"], 1 if r["hops"] == 1 else 2)
        assert all(is_held_out(t) for t in r["articles"]), r["id"]
        assert contains_answer(TEXT[r["articles"][-1]][: r["doc_chars"]], r["golden_answers"]), r["id"]
        assert not contains_answer(r["question"], r["golden_answers"]), r["id"]
        assert isinstance(r["cluster"], int)


def test_the_audit_flags_v1_at_the_eval_cut_and_nothing_in_v2():
    # issue 32's audit of v1: 143 of 330 cannot be read at 240 characters, 43 ambiguous, 1 wrong
    v1 = audit(V1, 240)
    assert v1["unreadable"] == 143 and 40 <= v1["ambiguous"] <= 48 and v1["wrong"] == 1
    v2 = audit(ROWS, 240)
    assert v2["any"] == 0


@pytest.mark.slow
def test_regenerating_gives_the_frozen_file():
    # ~4 s: the same corpus, split and cut give the same file byte for byte
    assert render(rows(240)) == FILE.read_text("utf-8")


def test_an_eval_at_another_cut_is_refused_naming_both_cuts():
    data = {"probe-v2": load_dataset("probe-v2", limit=3), "probe": load_dataset("probe", limit=3)}
    check_probe_cut(data, 240)
    with pytest.raises(
        DatasetError, match=r"probe-v2 .* generated at doc_chars 240, .* cuts documents at 400"
    ):
        check_probe_cut(data, 400)
    check_probe_cut({"probe": data["probe"]}, 400)  # v1 records no cut


def test_hygiene_checks_the_split_for_v2():
    rep = hygiene_report(load_dataset("probe-v2"))
    (sec,) = rep["sections"]
    assert sec["source"] == f"probe-v2 held-out split {SPLIT_VERSION}" and rep["clean"], sec


def test_a_probe_eval_refuses_a_warm_model_built_before_the_split(tmp_path, monkeypatch):
    from sesa_graph import warm_model as sft

    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / sft.COMPLETE).write_text("")
    (warm / sft.SUMMARY).write_text(json.dumps({"heldout_split": "heldout-v0"}))
    monkeypatch.setattr(sft, "warm_dir", lambda model="embedded": warm)
    with pytest.raises(
        DatasetError, match=r"embedded-warm .* before the held-out split .*sesa warmup --force"
    ):
        check_warm_split("embedded-warm", ["probe-v2"])
    check_warm_split("embedded-warm", ["nq"])  # no probe question: the split does not matter
    check_warm_split("runs/x/policies/solver", ["probe-v2"])  # a trained run was checked by sesa train
    (warm / sft.SUMMARY).write_text(json.dumps({"heldout_split": SPLIT_VERSION}))
    check_warm_split("embedded-warm", ["probe-v2"])
