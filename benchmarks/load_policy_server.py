"""Load check of `sesa policy serve --engine local`: many concurrent clients of short completions.

Starts the server as a user would (the embedded model on a free loopback port), then runs ``--clients``
concurrent clients, each sending one completion after another (``--max-tokens`` tokens, a prompt varied per
request so no two are identical) for ``--duration`` seconds, and prints requests served, errors by kind, p50/p99
latency and requests per second. Every ``--bad-every``-th request carries an out-of-vocabulary token id: it must
get a 400 and must not fail the requests batched with it.

    .venv/bin/python benchmarks/load_policy_server.py --clients 64 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tools.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["The capital of France is", "Water boils at", "The tallest mountain is", "A year has"]


def start_server(model: str, port: int, log: Path, threads: int | None) -> subprocess.Popen:
    sesa = str(ROOT / ".venv" / "bin" / "sesa")
    args = [sesa, "policy", "serve", "--engine", "local", "--model", model, "--port", str(port)]
    args += ["--threads", str(threads)] if threads else []
    with open(log, "w") as f:
        return subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 600) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            sys.exit(f"the server exited ({proc.returncode}):\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    sys.exit(f"the server at {url} was not healthy after {timeout_s:.0f} s; see {log}")


async def client(
    c: httpx.AsyncClient,
    i: int,
    args: argparse.Namespace,
    deadline: float,
    lat: list,
    outcomes: collections.Counter,
) -> None:
    n = 0
    while time.monotonic() < deadline:
        n += 1
        sent = sum(outcomes.values())  # all clients share one event loop: a global request count
        bad = args.bad_every and sent % args.bad_every == args.bad_every - 1
        body = {
            "model": args.model,
            "prompt": [1, 10**7] if bad else f"{PROMPTS[(i + n) % len(PROMPTS)]} ({i}.{n})",
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
        }
        t = time.monotonic()
        try:
            r = await c.post("/v1/completions", json=body)
            kind = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            kind = type(exc).__name__
        if bad:
            outcomes[f"bad request -> {kind}"] += 1
        else:
            outcomes[kind] += 1
            if kind == "HTTP 200":
                lat.append(time.monotonic() - t)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def run(url: str, args: argparse.Namespace) -> None:
    lat: list[float] = []
    outcomes: collections.Counter = collections.Counter()
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, timeout=args.timeout, limits=limits) as c:
        t0 = time.monotonic()
        deadline = t0 + args.duration
        await asyncio.gather(*(client(c, i, args, deadline, lat, outcomes) for i in range(args.clients)))
        wall = time.monotonic() - t0
    good = outcomes["HTTP 200"]
    errors = sum(v for k, v in outcomes.items() if k != "HTTP 200" and not k.startswith("bad request"))
    print(
        f"clients {args.clients}, {args.duration:.0f} s asked, {wall:.1f} s wall, max_tokens {args.max_tokens}"
    )
    print(f"requests served {good}, errors {errors}, req/s {good / wall:.2f}")
    print(
        f"latency p50 {pct(lat, 0.5):.2f} s, p99 {pct(lat, 0.99):.2f} s, max {max(lat, default=float('nan')):.2f} s"
    )
    print("outcomes: " + ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--bad-every", type=int, default=50, help="every Nth request is invalid (0: none)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-request client timeout, seconds")
    ap.add_argument("--threads", type=int, help="the server's torch threads (default: all cores)")
    ap.add_argument("--url", help="load an already running server instead of starting one")
    args = ap.parse_args()
    if args.url:
        asyncio.run(run(args.url.rstrip("/"), args))
        return
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"load_policy_server_{port}.log"
    proc = start_server(args.model, port, log, args.threads)
    url = f"http://127.0.0.1:{port}"
    try:
        print(f"server healthy after {wait_healthy(url, proc, log):.1f} s (log: {log})")
        asyncio.run(run(url, args))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:  # uvicorn waits for handlers whose clients already gave up
            print("the server did not stop within 30 s of SIGTERM: killed")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode not in (0, -signal.SIGTERM):
        print(f"server exit code {proc.returncode}; see {log}")


if __name__ == "__main__":
    main()
