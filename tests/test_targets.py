"""Target pools: the embedded builder, sampling in epochs, bootstrap questions (pool files:
tests/test_target_pool.py)."""

from collections import Counter

from sesa_graph.corpus.targets import Target, bootstrap_question, build_embedded_pool, sample_targets


def test_embedded_pool_and_sampling():
    pool = build_embedded_pool()
    assert len(pool) > 5000 and {t.hops for t in pool} == {1, 2, 3}
    assert all(len(t.answer.split()) <= 4 for t in pool)
    a = sample_targets(pool, 4, step=3, seed=0)
    assert a == sample_targets(pool, 4, step=3, seed=0)  # a resumed run draws the same targets
    assert a != sample_targets(pool, 4, step=4, seed=0)
    assert len({t.answer for t in a}) == 4


def test_targets_are_drawn_in_epochs_without_replacement():
    pool = [Target(f"t{i}", 1 + i % 3) for i in range(10)]
    # 10 targets, 3 a step: 3 steps an epoch (the 10th is dropped that epoch), no repeat inside an epoch
    epoch0 = [t for step in range(3) for t in sample_targets(pool, 3, step, seed=1)]
    assert len(epoch0) == 9 and len(set(epoch0)) == 9
    epoch1 = [t for step in range(3, 6) for t in sample_targets(pool, 3, step, seed=1)]
    assert len(set(epoch1)) == 9 and epoch1 != epoch0  # a fresh shuffle each epoch
    # over many epochs every target is drawn about equally often (with replacement it would scatter)
    counts = Counter(t.answer for step in range(300) for t in sample_targets(pool, 3, step, seed=1))
    assert set(counts) == {t.answer for t in pool} and max(counts.values()) - min(counts.values()) <= 30
    assert len(sample_targets(pool[:2], 3, step=5)) == 2  # a pool smaller than a step: all of it


def test_bootstrap_question_hides_the_target():
    q = bootstrap_question("Schist")
    assert q and "schist" not in q.lower()
    assert bootstrap_question("No Such Article Title") is None
