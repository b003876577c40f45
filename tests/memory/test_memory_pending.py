"""A writer stopped at any point of a commit or a counter update: readers (files only) show the last
finished state, exactly what Chroma held before it, and say a change is pending; the next writer
finishes it and the files equal Chroma again."""

import pytest
from bank_faults import Killed, arm, grown_bank, second_commit
from hash_encoder import HashEncoder

from sesa_graph.memory import MemoryConfig, SkillBank
from sesa_graph.memory.snapshot import committed_view

COMMIT_OPS = 10  # journal, 3 Chroma calls, queue, snapshot + report, skills.jsonl, state.json, unlink
COUNTER_OPS = 4  # journal, Chroma update, skills.jsonl, unlink


def _seen(view):
    return view.state["version"], view.queue_len, [s.model_dump() for s in view.skills]


def _chroma(bank):
    return [s.model_dump() for s in bank.skills()]


def _stop_and_check(path, bank, change, monkeypatch, at, ops):
    before = committed_view(path)
    assert before.pending is None and [s.model_dump() for s in before.skills] == _chroma(bank)
    fuse = arm(bank, monkeypatch, at)
    with pytest.raises(Killed):
        change()
    assert at < ops - 1 or fuse.tripped == "unlink journal"  # the last point is the last operation
    bank.close()  # the process is gone: its lock and Chroma client with it
    monkeypatch.undo()
    view = committed_view(path)
    journaled = at > 0
    assert (view.pending is not None) == journaled, fuse.tripped
    assert _seen(view) == _seen(before), f"readers disagree with Chroma when stopped at {fuse.tripped}"
    again = SkillBank.open(path, MemoryConfig(), HashEncoder())  # finishes (or never had) the change
    after = committed_view(path)
    assert after.pending is None and [s.model_dump() for s in after.skills] == _chroma(again)
    assert after.state["version"] == again.version
    return again, after


@pytest.mark.parametrize("at", range(COMMIT_OPS))
def test_a_commit_stopped_anywhere_reads_as_the_last_finished_one(tmp_path, monkeypatch, at):
    bank, queue = grown_bank(tmp_path / "bank")
    again, after = _stop_and_check(
        tmp_path / "bank", bank, lambda: second_commit(bank, queue), monkeypatch, at, COMMIT_OPS
    )
    if at > 0:  # the journal was written: the whole commit, exactly once
        assert again.version == 2 and "m-c" in again and "m-b" not in again and after.queue_len == 2
    else:
        assert again.version == 1 and "m-b" in again and after.queue_len == 4
    assert again.get("m-a").helpful == 1  # counters of the skills the commit did not touch are kept
    again.close()


@pytest.mark.parametrize("at", range(COUNTER_OPS))
def test_a_counter_update_stopped_anywhere_reads_as_the_last_finished_one(tmp_path, monkeypatch, at):
    bank, _ = grown_bank(tmp_path / "bank")
    credit = lambda: bank.apply_outcomes([(["m-a"], True, "answered")] * 3)
    again, _ = _stop_and_check(tmp_path / "bank", bank, credit, monkeypatch, at, COUNTER_OPS)
    assert again.get("m-a").helpful == (4 if at > 0 else 1)
    again.close()


def test_writers_that_never_stop_leave_no_journal_and_files_equal_chroma(tmp_path):
    bank, queue = grown_bank(tmp_path / "bank")
    second_commit(bank, queue)
    view = committed_view(tmp_path / "bank")
    assert view.pending is None and view.warning() is None
    assert [s.model_dump() for s in view.skills] == _chroma(bank) and view.state["version"] == 2
    bank.close()


@pytest.mark.parametrize("at", [1, COMMIT_OPS - 3, COMMIT_OPS - 2])
def test_the_notebooks_reader_shows_the_last_finished_skills_mid_commit(tmp_path, monkeypatch, at):
    """sesa_runs (the notebooks, `sesa trace`, the report) reads skills.jsonl: mid-commit it may be rewritten
    already, so it must show what committed_view shows."""
    from sesa_runs.files import BankFiles

    bank, queue = grown_bank(tmp_path / "bank")
    before = sorted(s["id"] for s in BankFiles(tmp_path / "bank").live())
    arm(bank, monkeypatch, at)
    with pytest.raises(Killed):
        second_commit(bank, queue)
    bank.close()
    monkeypatch.undo()
    assert sorted(s["id"] for s in BankFiles(tmp_path / "bank").live()) == before
