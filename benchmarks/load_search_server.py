"""Load check of the retrieval server: BM25 over the embedded corpus (~10k Wikipedia summaries), served by
``tools.server`` in its own process on a free loopback port, hit by N concurrent clients for a while.

Queries are real text: "What is <title>?" or 3-6 consecutive words of a random article, one query per
request as rollouts send them. An error is a transport failure, a non-200 answer, or an answer without
one result list. Prints requests served, errors, latency p50/p99 and requests per second.

    .venv/bin/python benchmarks/load_search_server.py [--clients 64] [--duration 60] [--k 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import sys
import time

import httpx
import numpy as np

from tools.corpus import load_embedded_corpus
from tools.server import bind_socket


def _serve(sock, k: int) -> None:
    from tools.bm25 import BM25Backend
    from tools.server import serve

    serve(BM25Backend.from_corpus("embedded"), default_k=k, log_level="warning", sock=sock)


def make_queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    docs = load_embedded_corpus()
    out = []
    for _ in range(n):
        d = rng.choice(docs)
        words = d.text.split()
        if rng.random() < 0.5 or len(words) < 8:
            out.append(f"What is {d.title}?")
        else:
            i, n_words = rng.randrange(len(words) - 6), rng.randint(3, 6)
            out.append(" ".join(words[i : i + n_words]))
    return out


async def client(
    url: str, queries: list[str], k: int, deadline: float, lat: list[float], errors: list[str]
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        i = 0
        while time.monotonic() < deadline:
            q = queries[i % len(queries)]
            i += 1
            t = time.perf_counter()
            try:
                resp = await http.post(
                    f"{url}/retrieve", json={"queries": [q], "topk": k, "return_scores": True}
                )
                ok = resp.status_code == 200 and len(resp.json()["result"]) == 1
                why = f"HTTP {resp.status_code}"
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
                ok, why = False, type(e).__name__
            if ok:
                lat.append(time.perf_counter() - t)
            else:
                errors.append(why)


async def load(
    url: str, clients: int, duration: float, k: int, seed: int
) -> tuple[list[float], list[str], float]:
    lat: list[float] = []
    errors: list[str] = []
    start = time.monotonic()
    tasks = [
        client(url, make_queries(500, seed + c), k, start + duration, lat, errors) for c in range(clients)
    ]
    await asyncio.gather(*tasks)
    return lat, errors, time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    sock = bind_socket("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    # fork: the child inherits the bound socket; the server gets its own interpreter (and GIL)
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(sock, args.k), daemon=True)
    server.start()
    sock.close()
    try:
        t = time.monotonic()
        while True:
            try:
                status = httpx.get(f"{url}/status", timeout=2).json()
                break
            except httpx.HTTPError:
                if not server.is_alive() or time.monotonic() - t > 300:
                    print("server did not start", file=sys.stderr)
                    return 1
                time.sleep(0.2)
        print(f"server up at {url} in {time.monotonic() - t:.1f} s: {status}")
        lat, errors, elapsed = asyncio.run(load(url, args.clients, args.duration, args.k, args.seed))
    finally:
        server.terminate()
        server.join(10)
    ms = np.asarray(lat) * 1000
    p50, p99 = np.percentile(ms, [50, 99]) if len(ms) else (float("nan"), float("nan"))
    kinds = {e: errors.count(e) for e in sorted(set(errors))}
    print(
        f"{args.clients} clients x {elapsed:.1f} s: {len(lat)} requests served, {len(errors)} errors {kinds or ''}\n"
        f"latency p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {ms.max() if len(ms) else float('nan'):.1f} ms\n"
        f"throughput {len(lat) / elapsed:.1f} req/s"
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
