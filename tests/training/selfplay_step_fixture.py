"""Two seeded self-play steps of a whole orchestrator with scripted policies, and what they wrote.

Step 0's proposals are all invalid, so its solver batch is refilled with bootstrap questions and
resampled with more; step 1's are valid and resampled with step 0's questions; step 2's are invalid again
and refilled with earlier questions. ``record`` returns the steps' metrics lines, their Parquet shards, their
failure records and seeded bootstrap draws (both kinds), as plain JSON. The frozen copy
(``selfplay_step.json``) was written by the code from before ``training.step`` owned the step (commit 8b19e1a,
whose orchestrator drew bootstrap questions with ``Orchestrator._bootstrap``), so the test that compares
against it shows that moving the step changed nothing a run writes.

    .venv/bin/python -m tests.training.selfplay_step_fixture [--write]
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).with_name("selfplay_step.json")
# wall-clock fields, the only ones a rerun may change
CLOCK = ("seconds", "time")
# Parquet columns kept readable in the fixture; every column is in the row digests
SHOWN = ("group_id", "question", "target", "final", "status", "reward", "correct", "selected")


def proposer_script(prompt: str, i: int) -> str:
    # step 0: all invalid (too few words), so the batch is refilled; step 1: valid where the checks agree
    if "Doc 1 (Title:" not in prompt:
        return "<search>French city</search>"
    # the last turn comes with its opening tag already written
    opening = "" if prompt.endswith("<question>") else "<question>"
    if "STEP1" not in prompt:
        return opening + "Where?</question>"
    # one question a target: groups that shared a question would share the solver's per-prompt counts
    target = re.search(r"Target answer: (.+)", prompt)
    clue = hashlib.sha256((target.group(1) if target else "").encode()).hexdigest()[:6]
    return (
        opening + f"Which French city hosted the revolutionary government of 1871 (clue {clue})?</question>"
    )


def solver_script():
    seen: Counter[str] = Counter()

    def script(prompt: str, i: int) -> str:
        if "Doc 1 (Title:" not in prompt:
            return "<search>" + prompt.rsplit("Question:", 1)[-1].split("\n")[0].strip()[:60] + "</search>"
        seen[prompt] += 1
        title = re.findall(r"Doc 1 \(Title: ([^)]*)\)", prompt)
        # every other rollout of a group answers with the top hit's title: groups whose answer is that
        # article get variance, the others fail (and, having searched, are failure records)
        if title and seen[prompt] % 2 == 1:
            return f"<answer>{title[-1]}</answer>"
        return "<answer>Nobody</answer>"

    return script


def _digest(row: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _canonical(row: dict[str, Any]) -> dict[str, Any]:
    """A row less its index in the group: which of a group's concurrent rollouts is the first to reach the
    scripted policy is up to the search threads, so only the group's rollouts as a set are compared."""
    return {k: v for k, v in row.items() if k != "sample"}


def record() -> dict[str, Any]:
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    import training.orchestrator as orch_mod
    from sesa_graph.config import RunConfig
    from sesa_graph.embedded import resolve_policy_model
    from sesa_graph.memory.mining import failures_path
    from tests.graphs.conftest import ScriptedPolicy

    tok = AutoTokenizer.from_pretrained(resolve_policy_model("embedded"))
    cfg = RunConfig.model_validate(
        {
            "name": "fixture",
            "seed": 3,
            "solver": {"max_turns": 2, "group_size": 2},
            "proposer": {"max_turns": 2, "rag_check": False},
            "judge": {"kind": "none"},
            "memory": {"mode": "off"},
            "train": {
                "targets_per_step": 3,
                "questions_per_step": 2,
                "reuse": "frontier",
                "resample_groups": 2,
                "rollout_concurrency": 2,
                "max_hops": 1,
            },
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        solver = ScriptedPolicy(tok, solver_script())
        proposer = ScriptedPolicy(tok, proposer_script)
        orig = orch_mod.start_models
        orch_mod.start_models = lambda *a, **k: ([solver, proposer], {})
        try:
            orch = orch_mod.Orchestrator(cfg, run)
        finally:
            orch_mod.start_models = orig
        try:
            out: dict[str, Any] = {"steps": []}
            for step in (0, 1, 2):
                # the proposer's prompts carry the pool's examples: marked at step 1 only, which turns valid
                orch.pool[:] = [replace(t, example="STEP1" if step == 1 else None) for t in orch.pool]
                summary = orch.run_step(step)
                shards = {}
                for role in ("proposer", "solver"):
                    rows = [_canonical(r) for r in pq.read_table(orch.store.path(step, role)).to_pylist()]
                    rows.sort(key=lambda r: (r["group_id"], _digest(r)))
                    shards[role] = {
                        "rows": len(rows),
                        "digests": [_digest(r) for r in rows],
                        "shown": [{k: r.get(k) for k in SHOWN} for r in rows],
                    }
                fails = failures_path(run, step).read_text().splitlines()
                out["steps"].append(
                    {
                        "metrics": {k: v for k, v in summary.metrics.items() if k not in CLOCK},
                        "shards": shards,
                        "failures": sorted((json.loads(line) for line in fails), key=_digest),
                    }
                )
            out["bootstrap_synth"] = orch.selfplay.bootstrap(5, 3, {"nothing"})
            # any corpus but the embedded one: cloze questions from the targets' own articles
            orch.selfplay.cfg = cfg.model_copy(
                update={"search": cfg.search.model_copy(update={"corpus": "/x.jsonl"})}
            )
            orch.selfplay.synth = None
            out["bootstrap_cloze"] = orch.selfplay.bootstrap(5, 3, set())
            return out
        finally:
            orch.close()


if __name__ == "__main__":
    got = record()
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if "--write" in sys.argv:
        FIXTURE.write_text(text)
    else:
        print(text)
