"""summary.json counts the consolidation committed after the last step (Orchestrator.finish) and the bank's
size after it: the default run's summary listed two consolidations and 16 skills while its bank held three
versions and 18 (the last pass's 2 skills were in skills.jsonl only)."""

from __future__ import annotations

import json

from sesa_graph.config import load_config
from sesa_graph.memory import MemoryConfig, SkillMemory
from training.launch import write_summary
from training.metrics_log import append_record, read_metrics


def test_the_final_consolidation_and_the_bank_after_it_are_in_the_summary(tmp_path):
    memory = SkillMemory.create(tmp_path / "bank", MemoryConfig(mode="static"))
    seeds = len(memory.bank)
    memory.close()
    for step in range(2):
        line = {"step": step, "valid_rate": 1.0, "bank_size": seeds, "solver_success_rates": [0.5]}
        if step == 1:
            line["consolidation"] = {"version": 1, "admitted": 0, "evicted": 0}
        append_record(tmp_path, line)
    rows = read_metrics(tmp_path).rows
    plain = write_summary(tmp_path, load_config(None), rows, 1.0)
    assert [c["version"] for c in plain["consolidations"]] == [1] and plain["final_bank_size"] == seeds
    append_record(tmp_path, {"final_consolidation": {"version": 2, "admitted": 0, "rejected": {}}})
    final = write_summary(tmp_path, load_config(None), read_metrics(tmp_path).rows, 1.0)
    assert final["consolidations"][-1] == {
        "version": 2,
        "admitted": 0,
        "rejected": {},
        "after_last_step": True,
    }
    assert final["final_bank_size"] == seeds  # read from the bank's files
    assert json.loads((tmp_path / "summary.json").read_text())["consolidations"][-1]["after_last_step"]
