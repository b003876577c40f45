"""The embedded default consolidates at least twice in its 4 steps, fed what its solver really produces:
failures of groups that all failed (p = 0), a few distinct questions a step (tests/fixtures, real records)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fakes import ScriptedDistiller

from sesa_graph.config import load_config

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "distiller_failures.jsonl"


def test_the_default_config_consolidates_at_least_twice(make_memory):
    cfg = load_config(None)
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    records = [r for r in records if r["group_success_rate"] == 0.0]  # the 135M solver's usual: no frontier
    mem = make_memory(ScriptedDistiller(), **cfg.memory.model_dump(exclude={"mode"}))
    versions = []
    for step in range(cfg.train.steps):
        rep = mem.end_step(step, failures=[{**r, "step": step} for r in records[step % 2 :: 2]])
        if rep.commit is not None and rep.commit.version is not None:
            versions.append(rep.commit.version)
        # a real step takes minutes: the pass is done by the next boundary. busy stays True until the next
        # end_step takes the result, so waiting on it alone would sit out the whole deadline
        deadline = time.monotonic() + 60
        while mem.consolidator.busy and not mem.consolidator.done and time.monotonic() < deadline:
            time.sleep(0.05)
    last = mem.commit(cfg.train.steps, wait=True, timeout=60)  # what the run's finish() does
    if last is not None and last.version is not None:
        versions.append(last.version)
    assert len(versions) >= 2, versions
