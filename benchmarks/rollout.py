"""Graph overhead and concurrency of solver rollouts on the real embedded model.

    .venv/bin/python benchmarks/rollout.py [--model embedded-warm] [--n 32] [--max-turns 3]

1. 32 solver rollouts through the solve graph (greedy, BM25), all requests recorded;
2. the same generation requests replayed straight to the policy client (each rollout's requests in order,
   rollouts concurrently), i.e. the same model work without LangGraph, search or token bookkeeping;
   overhead = (1) / (2) - 1, target <= 10%;
3. the graph at concurrency 1 vs 8 (rollouts in flight), on the first 8 questions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from graphs.solve import solve
from sesa_graph.config import SolverConfig
from sesa_graph.policy import GenerationRequest
from sesa_graph.policy.local import LocalPolicy
from sesa_graph.rollout.loop import RolloutContext, solver_spec
from tools.backends import make_backend
from tools.config import SearchConfig

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "benchmarks"


class Recorder:
    """Wraps a policy and records every request per rollout (keyed by the rollout's prompt)."""

    def __init__(self, policy):
        self.policy = policy
        self.name, self.tokenizer = policy.name, policy.tokenizer
        self.encode_messages, self.encode_text = policy.encode_messages, policy.encode_text
        self.log: list[GenerationRequest] = []

    async def generate(self, requests):
        self.log.extend(requests)
        return await self.policy.generate(requests)


def questions(n: int) -> list[str]:
    rows = []
    for name in ("hotpotqa", "bamboogle", "nq"):
        path = DATA / f"{name}.jsonl"
        if path.exists():
            rows += [json.loads(x)["question"] for x in path.read_text().splitlines()[:n]]
    return rows[:n] or [f"What is the capital of country number {i}?" for i in range(n)]


async def through_graph(qs, ctx, concurrency):
    sem = asyncio.Semaphore(concurrency)

    async def one(q):
        async with sem:
            return await solve(q, ctx)

    return await asyncio.gather(*(one(q) for q in qs))


async def replay(policy, per_rollout):
    async def one(reqs):
        for r in reqs:
            await policy.generate([r])

    await asyncio.gather(*(one(reqs) for reqs in per_rollout))


def timed(policy, make_coro):
    """Run ``make_coro()`` from an empty key/value cache: the replay sends the graph's exact prompts, and
    states left from the graph run would spare it every prefill (that once read as +67% graph overhead).
    Returns seconds, the result and (generate calls, requests, seconds inside generate)."""
    policy.kv_cache.clear()
    before = dict(policy.stats)
    t0 = time.perf_counter()
    out = asyncio.run(make_coro())
    seconds = time.perf_counter() - t0
    delta = tuple(policy.stats[k] - before[k] for k in ("batches", "requests", "generate_s"))
    return seconds, out, delta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="embedded-warm")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--max-turns", type=int, default=3)
    args = ap.parse_args()
    policy = LocalPolicy(args.model, max_batch_size=32)
    search = make_backend(SearchConfig())
    spec = solver_spec(
        SolverConfig(max_turns=args.max_turns, max_tokens_per_turn=64, max_total_tokens=512), greedy=True
    )
    qs = questions(args.n)
    asyncio.run(through_graph(qs[:2], RolloutContext(policy, search, spec), 2))  # warm-up

    rec_states = [(Recorder(policy), q) for q in qs]  # one recorder per rollout: its requests, in order

    async def run_all():
        return await asyncio.gather(*(solve(q, RolloutContext(rec, search, spec)) for rec, q in rec_states))

    graph_s, outs, graph_calls = timed(policy, run_all)
    per_rollout = [rec.log for rec, _ in rec_states]
    direct_s, _, direct_calls = timed(policy, lambda: replay(policy, per_rollout))
    gens = sum(len(r) for r in per_rollout)
    print(
        f"{len(qs)} rollouts, {gens} generations, statuses: "
        f"{ {s: sum(o['status'] == s for o in outs) for s in {o['status'] for o in outs}} }"
    )
    print(
        f"through the graph: {graph_s:.1f} s   straight to the policy: {direct_s:.1f} s   "
        f"overhead: {100 * (graph_s / direct_s - 1):+.1f}% (target <= 10%)"
    )
    for what, (calls, reqs, gen_s) in (
        ("graph", graph_calls),
        ("direct", direct_calls),
    ):  # batching may differ
        print(
            f"  {what}: {calls} generate calls, {reqs / max(calls, 1):.1f} requests each, {gen_s:.1f} s inside generate"
        )
    ctx = RolloutContext(policy, search, spec)
    for c in (1, 8):
        seconds, _, _ = timed(policy, lambda c=c: through_graph(qs[:8], ctx, c))
        print(f"graph, 8 rollouts at concurrency {c}: {seconds:.1f} s")


if __name__ == "__main__":
    main()
