"""The reuse pool that refills the solver batch: no same-step reuse, frontier first, rewind on resume."""

import json

from training.reuse import ReusePool


def q(name, target="T", hops=1):
    return {"question": name, "target": target, "hops": hops}


def test_a_step_never_reuses_its_own_or_excluded_questions(tmp_path):
    pool = ReusePool(tmp_path / "pool.json")
    pool.add(0, [q("a"), q("b")])
    pool.add(1, [q("c"), q("a")])  # "a" again: kept once, with its first step
    assert len(pool) == 3
    assert {p["question"] for p in pool.pick(1, 5)} == {"a", "b"}  # "c" is step 1's own
    assert [p["question"] for p in pool.pick(2, 5, exclude={"a", "b"})] == ["c"]
    assert pool.pick(0, 5) == []


def test_frontier_strategy_asks_split_groups_first_then_unasked(tmp_path):
    pool = ReusePool(tmp_path / "pool.json")
    pool.add(0, [q("solved"), q("split"), q("never"), q("was_split")])
    pool.record(0, {"solved": 1.0, "split": 0.4, "was_split": 0.2})
    pool.record(1, {"was_split": 0.0})  # the last rate counts: no longer on the frontier
    for seed in range(5):
        order = [p["question"] for p in pool.pick(2, 4, strategy="frontier", seed=seed)]
        assert order[:2] == ["split", "never"] and set(order[2:]) == {"solved", "was_split"}
    uniform = {tuple(p["question"] for p in pool.pick(2, 4, seed=s)) for s in range(8)}
    assert len(uniform) > 1  # uniform draws do not follow the rates


def test_rewind_forgets_what_a_rerun_step_added_and_survives_a_reload(tmp_path):
    path = tmp_path / "pool.json"
    pool = ReusePool(path)
    pool.add(0, [q("a")])
    pool.record(0, {"a": 0.0})
    pool.add(1, [q("b")])
    pool.record(1, {"a": 0.6, "b": 0.2})
    pool.save()
    again = ReusePool(path)  # as after a kill between saving the pool and committing step 1
    again.rewind(1)
    assert [e["question"] for e in again.entries] == ["a"] and again.entries[0]["rates"] == {"0": 0.0}


def test_pool_files_from_before_rates_still_load(tmp_path):
    path = tmp_path / "pool.json"
    path.write_text(json.dumps([q("old", "X", 2)]))
    pool = ReusePool(path)
    pool.rewind(0)  # older entries count as earlier than any step
    assert pool.pick(0, 1, strategy="frontier") == [q("old", "X", 2)]
