"""One self-play step on N embedded targets with the default config's policies (no training).

    .venv/bin/python benchmarks/selfplay_step.py [--targets 8] [--config configs/tiny-cpu.yaml]

Prints how many proposals were valid and why the others failed, the solver group success rates, both
policies' rewards, the skills retrieved, and the failures that would enter the skill memory's queue.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time

from sesa_graph.config import load_config
from sesa_graph.corpus.targets import sample_targets
from training.orchestrator import Orchestrator
from training.step import collect, play


def _print_turns(turns_json: str) -> None:
    for turn in json.loads(turns_json):
        print("      | " + str(turn.get("text", "")).replace("\n", "\n      | "))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", type=int, default=8)
    ap.add_argument("--config", default=None)
    ap.add_argument("--step", type=int, default=0, help="Which step's targets to draw (deterministic).")
    ap.add_argument(
        "--traces", action="store_true", help="Also print every turn of every proposer and solver rollout."
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Config override, e.g. --set proposer.max_turns=4 (repeatable).",
    )
    args = ap.parse_args()
    overrides = dict(kv.split("=", 1) for kv in args.set)
    cfg = load_config(args.config, {"memory.mode": "static", **overrides})
    with tempfile.TemporaryDirectory() as tmp:
        orch = Orchestrator(cfg, tmp)
        targets = sample_targets(orch.pool, args.targets, args.step, cfg.seed)
        items = [
            {"item_id": f"{args.step}-{i}", "target": t.answer, "hops": t.hops} for i, t in enumerate(targets)
        ]
        t0 = time.perf_counter()
        finals = asyncio.run(play(items, orch.ctx, max_concurrency=args.targets))
        out = collect(items, finals, args.step, "", None, (0, 0), orch.ctx)
        secs = time.perf_counter() - t0
        print(f"{len(items)} targets in {secs:.0f} s")
        for p in out.proposer:
            print(
                f"- target {p.target!r} (hops {p.hops}): {'VALID' if p.valid else 'invalid: ' + str(p.invalid_reason)}"
                f"  reward {p.reward:+.2f}  p={p.success_rate}  question={p.final!r}"
            )
            if args.traces:
                _print_turns(p.turns_json)
        for t in out.solver:
            print(
                f"    solver {t.group_id} #{t.sample}: {t.status:10s} answer={t.final!r} reward={t.reward} "
                f"skills={t.skill_ids}"
            )
            if args.traces:
                _print_turns(t.turns_json)
        m = out.metrics
        print(
            json.dumps(
                {
                    k: m[k]
                    for k in (
                        "valid_proposals",
                        "valid_rate",
                        "invalid_reasons",
                        "solver_success_rates",
                        "frontier_groups",
                        "proposer_reward_mean",
                        "solver_reward_mean",
                        "solver_status",
                        "failures",
                    )
                },
                indent=1,
            )
        )
        orch.memory.close()


if __name__ == "__main__":
    main()
