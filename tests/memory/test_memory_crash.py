"""Kill -9 a process in the middle of a consolidation; the bank and queue reopen intact."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sesa_graph.memory import MemoryConfig, SkillMemory

CHILD = Path(__file__).with_name("crash_child.py")


def _run_and_kill(tmp_path: Path, variant: str) -> Path:
    bank, marker = tmp_path / "bank", tmp_path / "parked"
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(bank), variant, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 180
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"child exited early ({proc.returncode}): {proc.stdout.read().decode()[-2000:]}")
        if time.time() > deadline:
            proc.kill()
            pytest.fail("child never reached the kill point")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    return bank


def _keys(bank: Path) -> set[str]:
    return {e["key"] for e in json.loads((bank / "queue.json").read_text())["entries"]}


def test_kill_while_distilling_leaves_the_bank_and_queue_as_they_were(tmp_path, encoder):
    bank = _run_and_kill(tmp_path, "distilling")
    mem = SkillMemory.open(bank, MemoryConfig(mode="static"), encoder=encoder)
    assert mem.version == 0 and len(mem.bank) == 15
    assert len(mem.queue) == 25 and mem.bank.get("seed-dates-exact").hurt == 2  # counters kept too
    assert mem.retrieve(["When was the company founded?"])[0]
    mem.close()


def test_kill_in_the_middle_of_a_commit_finishes_it_on_reopen(tmp_path, encoder):
    bank = _run_and_kill(tmp_path, "committing")
    # the child died with Chroma changed but the queue and state files not yet rewritten
    assert (bank / "journal.json").exists()
    assert json.loads((bank / "state.json").read_text())["version"] == 0
    assert len(_keys(bank)) == 25
    mem = SkillMemory.open(bank, MemoryConfig(mode="static"), encoder=encoder)
    assert not (bank / "journal.json").exists()
    assert mem.version == 1 and len(mem.bank) == 15 + 8  # the whole commit, exactly once
    assert len(mem.queue) == 0 and _keys(bank) == set()
    assert (bank / "snapshots" / "v0001.jsonl").is_file()
    assert mem.bank.get("seed-dates-exact").hurt == 2
    mem.close()
    again = SkillMemory.open(bank, MemoryConfig(mode="static"), encoder=encoder)  # and it stays that way
    assert again.version == 1 and len(again.bank) == 23
    again.close()
