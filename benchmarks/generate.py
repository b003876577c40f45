"""Aggregate generation throughput of the policy engines at several concurrencies, side by side.

    .venv/bin/python benchmarks/generate.py [--engine both|local|vllm] [--model embedded] [--tokens 64]
                                            [--concurrency 1,8,32] [--cpu-bind 0-1] [--kv-cache-gib 1]

Concurrency N issues N independent ``generate`` calls at once (as N rollouts would). ``local`` is the
in-process transformers policy (micro-batched); ``vllm`` is a vLLM server started by the project
(``backend: vllm``) and driven through the project's ``OpenAIPolicy``, exactly as training drives it.
Targets (issue 14): vLLM >= 3x local at concurrency 8 and >= 4x at 32.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from sesa_graph.policy import GenerationRequest, SamplingParams

QUESTIONS = [
    "Describe the Eiffel Tower.",
    "Who was Marie Curie?",
    "Explain photosynthesis.",
    "What is a black hole?",
    "Tell me about the Nile.",
    "Who painted the Mona Lisa?",
    "What is jazz?",
    "Describe the Roman Empire.",
]


async def run(policy, n: int, tokens: int, rounds: int) -> tuple[float, int]:
    total = 0
    t0 = time.perf_counter()
    for r in range(rounds):
        reqs = [
            GenerationRequest(
                messages=[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                sampling=SamplingParams(
                    max_tokens=tokens, temperature=1.0
                ),  # no seed: the local policy batches only unseeded requests
            )
            for i in range(n)
        ]
        results = await asyncio.gather(*(policy.generate([q]) for q in reqs))
        total += sum(len(res[0].token_ids) for res in results)
    return time.perf_counter() - t0, total


def measure(policy, levels: list[int], tokens: int, rounds: int) -> dict[int, float]:
    asyncio.run(run(policy, 1, 8, 1))  # warm-up: the first call pays one-time costs
    out = {}
    for n in levels:
        secs, toks = asyncio.run(run(policy, n, tokens, rounds))
        out[n] = toks / secs
        print(
            f"  concurrency {n:>3}: {toks:>6} tokens in {secs:>7.2f} s = {out[n]:>7.1f} tokens/s", flush=True
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("both", "local", "vllm"), default="both")
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--concurrency", default="1,8,32", help="comma-separated levels")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cpu-bind", default="0-1", help="vLLM: cores for its OpenMP threads")
    ap.add_argument("--kv-cache-gib", type=int, default=1)
    ap.add_argument(
        "--server-arg", action="append", default=[], help="vLLM: extra server argument (repeatable)"
    )
    ap.add_argument("--compile", action="store_true", help="vLLM: torch.compile instead of eager mode")
    ap.add_argument("--threads", type=int, default=None, help="local: torch threads (default: one per core)")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]

    from sesa_graph.model_config import PolicyConfig
    from sesa_graph.policy.factory import make_policy

    results: dict[str, dict[int, float]] = {}
    if args.engine in ("both", "local"):
        print("local (in-process transformers):")
        policy = make_policy(PolicyConfig(model=args.model, backend="local", threads=args.threads))
        results["local"] = measure(policy, levels, args.tokens, args.rounds)
        del policy
    if args.engine in ("both", "vllm"):
        print(f"vllm (server bound to cores {args.cpu_bind}, through OpenAIPolicy):")
        t0 = time.perf_counter()
        policy = make_policy(
            PolicyConfig(
                model=args.model,
                backend="vllm",
                cpu_bind=args.cpu_bind,
                kv_cache_gib=args.kv_cache_gib,
                enforce_eager=not args.compile,
                server_args=args.server_arg,
            )
        )
        print(f"  server healthy after {time.perf_counter() - t0:.1f} s")
        try:
            results["vllm"] = measure(policy, levels, args.tokens, args.rounds)
        finally:
            policy.close()
    print(
        f"\n{'concurrency':>11} "
        + " ".join(f"{e + ' tok/s':>12}" for e in results)
        + ("   vllm/local" if len(results) == 2 else "")
    )
    for n in levels:
        row = " ".join(f"{results[e][n]:>12.1f}" for e in results)
        ratio = f"   {results['vllm'][n] / results['local'][n]:>9.2f}x" if len(results) == 2 else ""
        print(f"{n:>11} {row}{ratio}")


if __name__ == "__main__":
    main()
