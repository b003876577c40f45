"""Aggregate generation throughput of the local policy at concurrency 1 and N, and peak memory.

    .venv/bin/python benchmarks/generate.py [--model embedded] [--tokens 64] [--concurrency 8]

Concurrency N issues N independent ``generate`` calls at once (as N rollouts of a group would); the
policy micro-batches them into one ``model.generate``. Target: concurrency 8 >= 3x concurrency 1.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time

from sesa_graph.policy import GenerationRequest, SamplingParams
from sesa_graph.policy.local import LocalPolicy

QUESTIONS = [
    "Describe the Eiffel Tower.", "Who was Marie Curie?", "Explain photosynthesis.", "What is a black hole?",
    "Tell me about the Nile.", "Who painted the Mona Lisa?", "What is jazz?", "Describe the Roman Empire.",
]


async def run(policy: LocalPolicy, n: int, tokens: int, rounds: int) -> tuple[float, int]:
    total = 0
    t0 = time.perf_counter()
    for r in range(rounds):
        reqs = [
            GenerationRequest(
                messages=[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                # no EOS stop within budget is likely at temperature 1; count what was generated anyway
                sampling=SamplingParams(max_tokens=tokens, temperature=1.0, seed=r),
            )
            for i in range(n)
        ]
        results = await asyncio.gather(*(policy.generate([q]) for q in reqs))
        total += sum(len(res[0].token_ids) for res in results)
    return time.perf_counter() - t0, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    policy = LocalPolicy(args.model)
    asyncio.run(run(policy, 1, 8, 1))  # warm-up: first call pays one-time costs
    rows = []
    for n in (1, args.concurrency):
        secs, toks = asyncio.run(run(policy, n, args.tokens, args.rounds))
        rows.append((n, toks, secs, toks / secs))
    print(f"{'concurrency':>11} {'tokens':>7} {'seconds':>8} {'tokens/s':>9}")
    for n, toks, secs, tps in rows:
        print(f"{n:>11} {toks:>7} {secs:>8.2f} {tps:>9.1f}")
    print(f"speed-up at concurrency {args.concurrency}: {rows[1][3] / rows[0][3]:.2f}x (target >= 3x)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
