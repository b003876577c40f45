"""Target pools: SSP format, the embedded builder, deterministic sampling, bootstrap questions."""

import json

import pytest

from sesa_graph.fsutil import JsonlError
from sesa_graph.targets import Target, bootstrap_question, build_embedded_pool, load_ssp_pool, sample_targets


def test_ssp_pool_format(tmp_path):
    p = tmp_path / "pool.jsonl"
    rows = [
        {"ground_truth": ["Richard Strauss"], "search_turns": 2, "sys_question_example": "Who ...?"},
        {"ground_truth": "Paris", "search_turns": 9},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert load_ssp_pool(p) == [Target("Richard Strauss", 2, "Who ...?"), Target("Paris", 5, None)]
    p.write_text('{"ground_truth": ["a"]}\nnot json\n')
    with pytest.raises(JsonlError, match="pool.jsonl:2"):
        load_ssp_pool(p)
    p.write_text('{"answer": "x"}\n')
    with pytest.raises(ValueError, match="row 1"):
        load_ssp_pool(p)


def test_embedded_pool_and_sampling():
    pool = build_embedded_pool()
    assert len(pool) > 5000 and {t.hops for t in pool} == {1, 2, 3}
    assert all(len(t.answer.split()) <= 4 for t in pool)
    a = sample_targets(pool, 4, step=3, seed=0)
    assert a == sample_targets(pool, 4, step=3, seed=0)  # a resumed run draws the same targets
    assert a != sample_targets(pool, 4, step=4, seed=0)
    assert len({t.answer for t in a}) == 4


def test_bootstrap_question_hides_the_target():
    q = bootstrap_question("Schist")
    assert q and "schist" not in q.lower()
    assert bootstrap_question("No Such Article Title") is None
