"""One writer per bank, enforced by an OS lock: a second writer (another process or the same one) fails
naming the holder, readers never take the lock, and a dead holder never blocks."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hash_encoder import HashEncoder

from sesa_graph.memory import (
    BankError,
    BankExistsError,
    BankLockedError,
    MemoryConfig,
    SkillBank,
    SkillMemory,
)
from sesa_graph.memory.snapshot import committed_view

CHILD = Path(__file__).with_name("lock_child.py")


@pytest.fixture
def bank_path(tmp_path):
    SkillBank.create(tmp_path / "bank", MemoryConfig(), HashEncoder()).close()
    return tmp_path / "bank"


def _open(path, **kw):
    return SkillBank.open(path, MemoryConfig(), HashEncoder(), **kw)


def test_a_second_writer_in_the_same_process_is_refused_naming_the_holder(bank_path):
    first = _open(bank_path)
    with pytest.raises(BankLockedError) as e:
        _open(bank_path)
    msg = str(e.value)
    assert str(bank_path) in msg and f"held by pid {os.getpid()}: " in msg and "since " in msg
    with pytest.raises(BankLockedError):
        SkillMemory.open(bank_path, MemoryConfig(mode="static"), encoder=HashEncoder())
    ro = _open(bank_path, read_only=True)  # readers never take the lock
    assert len(ro) == 15 and committed_view(bank_path).pending is None
    ro.close()
    first.close()
    first.close()  # idempotent
    again = _open(bank_path)
    again.close()


def test_a_closed_bank_is_not_written_behind_the_next_writer(bank_path):
    bank = _open(bank_path)
    bank.close()
    with pytest.raises(BankError, match="is closed"):
        bank.apply_outcomes([(["seed-dates-exact"], True, "answered")])


def test_create_holds_the_lock_too(tmp_path):
    bank = SkillBank.create(tmp_path / "bank", MemoryConfig(), HashEncoder())
    with pytest.raises(BankLockedError):
        _open(tmp_path / "bank")
    with pytest.raises(BankExistsError):
        SkillBank.create(tmp_path / "bank", MemoryConfig(), HashEncoder())
    bank.close()


def test_a_stale_holder_record_does_not_block(bank_path):
    # what a killed writer leaves: a record naming a process that holds no lock any more
    (bank_path / "writer.lock").write_text('{"pid": 999999, "cmd": "sesa train x", "since": 0}\n')
    bank = _open(bank_path)
    assert f'"pid": {os.getpid()}' in (bank_path / "writer.lock").read_text()
    bank.close()
    assert (bank_path / "writer.lock").read_text() == ""  # released: no holder to name


def _child(bank_path):
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(bank_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _say(proc, cmd):
    proc.stdin.write(cmd + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "ok"


@pytest.mark.slow  # a child process that imports Chroma
def test_two_processes_the_second_writer_fails_and_no_counter_update_is_lost(bank_path):
    """The issue's lost-data case: without the lock the second writer's skills.jsonl and state.json
    silently dropped the first's counter updates while Chroma kept both."""
    proc = _child(bank_path)
    try:
        _say(proc, "credit 3")
        with pytest.raises(BankLockedError) as e:
            _open(bank_path)
        assert f"held by pid {proc.pid}: lock_child.py {bank_path} since " in str(e.value)
        # readers keep working next to the writer and see its updates
        assert {s.id: s.helpful for s in committed_view(bank_path).skills}["seed-dates-exact"] == 3
        _say(proc, "credit 2")
        _say(proc, "close")
    finally:
        proc.stdin.close()
        proc.wait(30)
    bank = _open(bank_path)
    assert bank.get("seed-dates-exact").helpful == 5  # every update of the first writer is there
    assert {s.id: s.helpful for s in committed_view(bank_path).skills}["seed-dates-exact"] == 5
    bank.close()


@pytest.mark.slow  # a child process that imports Chroma
def test_a_killed_writer_releases_the_lock(bank_path):
    proc = _child(bank_path)
    _say(proc, "credit 1")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    bank = _open(bank_path)  # the kernel dropped the dead writer's lock; its record is overwritten
    assert bank.get("seed-dates-exact").helpful == 1
    bank.close()
