"""Hand-made run directories as a killed or finished `sesa train` leaves them (no training runs)."""

from __future__ import annotations

import json
from pathlib import Path

from sesa_graph.config import RunConfig
from sesa_graph.fsutil import dump_yaml


def make_run(
    root: Path,
    *,
    steps: int = 5,
    committed: int = 3,
    uncommitted_line: bool = True,
    final: bool = False,
    torn: bytes = b"",
    memory_mode: str = "on",
    lr_scheduler: str = "constant",
) -> Path:
    """``committed`` steps with metrics lines, shards, failures and commit markers; with
    ``uncommitted_line`` also the metrics line and shards of the next step, killed before its commit."""
    run = root / "runs" / "r"
    (run / "sync").mkdir(parents=True)
    cfg = RunConfig(name="r").model_dump(mode="json")
    cfg["train"]["steps"], cfg["memory"]["mode"] = steps, memory_mode
    cfg["train"]["lr_scheduler"] = lr_scheduler  # "constant": the budget may change (training.resume)
    (run / "config.yaml").write_text(dump_yaml(cfg, sort_keys=False))
    lines = []
    last = committed + (1 if uncommitted_line else 0)
    for s in range(last):
        lines.append(
            json.dumps({"step": s, "items": 2, "valid_proposals": 1, "valid_rate": 0.5, "attempt": 1})
        )
        shard = run / "trajectories" / f"step-{s:05d}"
        shard.mkdir(parents=True)
        (shard / "solver.parquet").write_bytes(b"PAR1 step %d" % s)
        (run / "failures").mkdir(exist_ok=True)
        (run / "failures" / f"step-{s:06d}.jsonl").write_text(json.dumps({"step": s}) + "\n")
        (run / "sync" / f"ready-solver-{s}.json").write_text("{}")
        if s < committed:
            (run / "sync" / f"committed-{s}.json").write_text("{}")
    if final:
        lines.append(json.dumps({"final_consolidation": {"version": 2, "admitted": 1, "rejected": 0}}))
        (run / "summary.json").write_text(json.dumps({"steps": committed}))
        (run / "policies" / "solver").mkdir(parents=True)
        (run / "policies" / "solver" / ".complete").write_text("ok\n")
    pool = [
        {"question": f"q{s}", "target": "t", "hops": 1, "step": s, "rates": {str(s): 0.5}}
        for s in range(last)
    ]
    (run / "reuse_pool.json").write_text(json.dumps(pool))
    (run / "sync" / "STOP.json").write_text(json.dumps({"reason": "KeyboardInterrupt"}))
    (run / "metrics.jsonl").write_bytes(("".join(x + "\n" for x in lines)).encode() + torn)
    return run
