"""Search benchmark over the embedded corpus (~10k Wikipedia summaries), CPU.

Prints: BM25 index build time; BM25 latency per query (p50/p95, one query per call); dense latency per
query excluding and including query encoding; top-3 hit rate of BM25 and dense for "What is <title>?"
over 1,000 randomly chosen articles (hit = that article is among the top 3).

    .venv/bin/python benchmarks/search.py [--n 1000] [--seed 0] [--skip-dense] [--threads 1]

Dense document embeddings are computed once and cached under ``sesa_home()/dense/`` (slow the first time).
"""

from __future__ import annotations

import argparse
import os
import random
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tools.bm25 import BM25Backend
from tools.corpus import load_embedded_corpus


def percentiles_ms(seconds: list[float]) -> str:
    p50, p95 = np.percentile(np.asarray(seconds) * 1000, [50, 95])
    return f"p50 {p50:.3f} ms  p95 {p95:.3f} ms"


def timed_each(fn, items) -> tuple[list, list[float]]:
    out, times = [], []
    for item in items:
        t = time.perf_counter()
        out.append(fn(item))
        times.append(time.perf_counter() - t)
    return out, times


def hit_rate(results: list[list], targets: list[str]) -> float:
    return sum(t in [d.id for d in docs] for docs, t in zip(results, targets, strict=True)) / len(targets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="articles sampled for the queries")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-dense", action="store_true")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="set torch and faiss (OpenMP) threads; 1 avoids thread contention on a busy machine",
    )
    args = ap.parse_args()
    if args.threads:
        import faiss
        import torch

        faiss.omp_set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    print(
        f"threads: {args.threads or 'library defaults'} (cpu count {os.cpu_count()}, load avg {os.getloadavg()[0]:.1f})"
    )

    docs = load_embedded_corpus()
    sample = random.Random(args.seed).sample(docs, args.n)
    queries = [f"What is {d.title}?" for d in sample]
    targets = [d.id for d in sample]
    print(f"corpus: embedded, {len(docs)} docs; {len(queries)} queries 'What is <title>?' (seed {args.seed})")

    t = time.perf_counter()
    bm25 = BM25Backend(docs)  # no cache_dir: always a fresh build
    print(f"BM25 index build: {time.perf_counter() - t:.2f} s")
    bm25.search(queries[:10])  # warm-up
    results, times = timed_each(lambda q: bm25.search([q], k=3)[0], queries)
    print(f"BM25 latency per query (1 query per call): {percentiles_ms(times)}")
    t = time.perf_counter()
    bm25.search(queries, k=3)
    print(
        f"BM25 batched ({len(queries)} queries in one call): {(time.perf_counter() - t) / len(queries) * 1000:.3f} ms/query"
    )
    print(f"BM25 top-3 hit rate: {hit_rate(results, targets):.3f}")

    if args.skip_dense:
        return
    from tools.dense import DenseBackend

    t = time.perf_counter()
    dense = DenseBackend.from_corpus("embedded")
    how = "loaded from cache" if dense.loaded_from_cache else "encoded"
    print(
        f"dense ({dense.encoder.model_name}, dim {dense.index.d}) doc embeddings {how}: {time.perf_counter() - t:.2f} s"
    )
    dense.search(queries[:10])  # warm-up
    vecs = dense.encoder.encode_queries(queries)
    _, times = timed_each(lambda v: dense.search_vectors(v[None, :], k=3)[0], vecs)
    print(f"dense latency per query excluding encoding: {percentiles_ms(times)}")
    results, times = timed_each(lambda q: dense.search([q], k=3)[0], queries)
    print(f"dense latency per query including encoding: {percentiles_ms(times)}")
    print(f"dense top-3 hit rate: {hit_rate(results, targets):.3f}")


if __name__ == "__main__":
    main()
