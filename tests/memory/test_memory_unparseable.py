"""A distiller whose every output is unparseable is a dead distiller: nothing committed, failures stay
queued, and the dead-distiller guard raises after max_consecutive_distiller_errors such passes."""

import pytest
from fakes import ScriptedDistiller, by_index, failure

from sesa_graph.memory import DistillerError

# a thinking chat template: the whole budget spent inside <think>, no JSON
THINKING = "<think>\nOkay, the agent searched for the war but the treaty name is"


def test_all_unparseable_outputs_count_toward_the_dead_distiller_guard(make_memory):
    distiller = ScriptedDistiller(lambda q, user: THINKING)
    mem = make_memory(distiller, max_consecutive_distiller_errors=3)
    mem.add_failures([failure(i) for i in range(25)])
    keys = set(mem.queue.entries)
    for n, step in enumerate((10, 20), start=1):
        assert mem.maybe_consolidate(step)
        rep = mem.commit(step, wait=True, timeout=60)
        assert rep.version is None and "unparseable" in rep.error and "<think>" in rep.error
        assert set(mem.queue.entries) == keys and mem.version == 0 and len(mem.bank) == 15
        assert mem.bank.state["consecutive_distiller_errors"] == n
        assert mem.bank.stats["distiller_unparseable"] == n
    assert mem.maybe_consolidate(30)
    with pytest.raises(DistillerError, match="unparseable in 3 consolidations in a row") as info:
        mem.commit(30, wait=True, timeout=60)
    assert "enable_thinking: false" in str(info.value)
    assert set(mem.queue.entries) == keys and mem.version == 0
    assert len(distiller.calls) == 3

    mem.consolidator.client = ScriptedDistiller(by_index)  # e.g. restarted with enable_thinking false
    assert mem.maybe_consolidate(40)
    rep = mem.commit(40, wait=True, timeout=60)
    assert rep.version == 1 and rep.error is None and mem.bank.state["consecutive_distiller_errors"] == 0


def test_errors_and_unparseable_outputs_share_one_streak(make_memory):
    mem = make_memory(ScriptedDistiller(fail=True), max_consecutive_distiller_errors=2)
    mem.add_failures([failure(i) for i in range(25)])
    assert mem.maybe_consolidate(10)
    assert mem.commit(10, wait=True, timeout=60).version is None
    mem.consolidator.client = ScriptedDistiller(lambda q, user: "I cannot help with that.")
    assert mem.maybe_consolidate(20)
    with pytest.raises(DistillerError, match="unparseable in 2 consolidations"):
        mem.commit(20, wait=True, timeout=60)


def test_one_parseable_output_is_a_working_distiller(make_memory):
    """Some garbage among parseable outputs is ordinary rejection, not a dead distiller."""
    outputs = iter(["garbage"] * 19 + [None])

    def script(q, user):
        out = next(outputs)
        return out if out is not None else by_index(q, user)

    mem = make_memory(ScriptedDistiller(script), max_consecutive_distiller_errors=1)
    mem.add_failures([failure(i) for i in range(20)])
    assert mem.maybe_consolidate(10)
    rep = mem.commit(10, wait=True, timeout=60)
    assert rep.version == 1 and rep.rejected.get("unparseable") == 19
    assert len(mem.queue) == 0
