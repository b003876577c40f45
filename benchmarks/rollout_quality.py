"""Rollout quality of a solver policy: does it follow the tag protocol, and how well does it answer?

Runs greedy solver rollouts through the solve graph (``graphs/solve.py``) with BM25 over the embedded
corpus and the default ``SolverConfig`` (10 turns, 3 docs of 400 characters) or the solver section of
``--config``, on the first ``--n`` questions of each benchmark file, and prints per dataset: the share of
rollouts that ended ``answered`` (a well-formed ``<answer>``; target >= 80% for the warmed embedded
model), the other end states, the share of invalid turns, mean turns and searches, exact match, token F1
and the judge score (exact match, else ``--judge policy``: the solver model asked Correct/Wrong), and
wall time.

    .venv/bin/python benchmarks/rollout_quality.py                       # embedded-warm, 20 + 20 questions
    .venv/bin/python benchmarks/rollout_quality.py --n 60 --datasets bamboogle,hotpotqa
    .venv/bin/python benchmarks/rollout_quality.py --model embedded --n 5   # the base model, for contrast
    .venv/bin/python benchmarks/rollout_quality.py --config configs/tiny-cpu.yaml --judge none

The warmed model must exist (``sesa warmup``). Questions: ``<data-dir>/<dataset>.jsonl`` with ``question``
and ``golden_answers`` per line (default data dir: /work/shared/data/benchmarks or $SESA_BENCHMARKS).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_DATA_DIR = os.environ.get("SESA_BENCHMARKS", "/work/shared/data/benchmarks")
STATUSES = ("answered", "malformed", "max_turns", "search_error")


def load_questions(data_dir: Path, dataset: str, n: int) -> list[dict]:
    path = Path(dataset) if dataset.endswith(".jsonl") else data_dir / f"{dataset}.jsonl"
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not row.get("question") or not row.get("golden_answers"):
                raise ValueError(f"{path}:{lineno}: needs 'question' and 'golden_answers'")
            rows.append(row)
            if len(rows) >= n:
                break
    return rows


async def run_all(questions: list[str], ctx, concurrency: int) -> list[dict]:
    from graphs.solve import solve

    sem = asyncio.Semaphore(concurrency)
    done = 0

    async def one(q: str) -> dict:
        nonlocal done
        async with sem:
            state = dict(await solve(q, ctx))
        done += 1
        print(
            f"  [{done}/{len(questions)}] {state.get('status')}, {state.get('n_turns')} turns, "
            f"{len(state.get('searches') or [])} searches: {str(state.get('final'))[:60]!r}",
            flush=True,
        )
        return state

    return await asyncio.gather(*(one(q) for q in questions))


def summarize(rows: list[tuple[dict, dict]], verdicts: list) -> dict:
    from sesa_graph.scoring import exact_match, f1_score

    n = len(rows)
    status = Counter(s.get("status") for _, s in rows)
    turns = [s.get("n_turns", 0) for _, s in rows]
    searches = [len(s.get("searches") or []) for _, s in rows]
    all_turns = [t for _, s in rows for t in s.get("turns") or []]
    invalid = sum(1 for t in all_turns if t.get("kind") == "invalid")
    em = [
        exact_match(s.get("final") if s.get("status") == "answered" else None, q["golden_answers"])
        for q, s in rows
    ]
    f1 = [
        f1_score(s.get("final") if s.get("status") == "answered" else None, q["golden_answers"])
        for q, s in rows
    ]
    return {
        "n": n,
        **{f"{k}_share": status.get(k, 0) / n for k in STATUSES},
        # answered on a last turn whose <answer> tag the environment opened (force_final_answer)
        "forced_share": sum(s.get("status") == "answered" and bool(s.get("final_turn")) for _, s in rows) / n,
        "invalid_turn_share": invalid / max(len(all_turns), 1),
        "mean_turns": statistics.mean(turns),
        "mean_searches": statistics.mean(searches),
        "em": statistics.mean(em),
        "f1": statistics.mean(f1),
        "judge": statistics.mean(v.score for v in verdicts),
        "judge_unavailable": sum(v.method == "judge_unavailable" for v in verdicts),
    }


async def run_proposer(n: int, policy, search, seed: int) -> dict:
    """``n`` greedy proposer rollouts on embedded-pool targets (hops 1..3), with the static validity
    checks (the retrieval-augmented judge check is off: this measures the format)."""
    import dataclasses

    from graphs.propose import ProposeContext, propose
    from sesa_graph.config import load_config
    from sesa_graph.corpus.targets import build_embedded_pool, sample_targets
    from sesa_graph.rollout.loop import proposer_spec

    run = load_config(None)  # the default run's proposer budgets
    cfg = run.proposer.model_copy(update={"rag_check": False})
    spec = dataclasses.replace(proposer_spec(cfg, run.solver.search_k, run.solver.doc_chars), temperature=0.0)
    ctx = ProposeContext(policy=policy, search=search, spec=spec, seed=seed, checks=cfg, judge=None)
    targets = sample_targets(build_embedded_pool(seed=seed), n, step=0, seed=seed)
    t = time.perf_counter()
    states = await asyncio.gather(*(propose(tg.answer, tg.hops, ctx) for tg in targets))
    reasons = Counter(s.get("invalid_reason") or "valid" for s in states)
    for tg, s in zip(targets, states):
        print(
            f"  proposer [{tg.answer} / {tg.hops} hops] {s.get('status')}, "
            f"{len(s.get('searches') or [])} searches -> {s.get('invalid_reason') or 'valid'}: {s.get('final')!r}"
        )
    return {
        "n": n,
        "question_share": sum(s.get("status") == "answered" for s in states) / n,
        "valid_share": reasons.get("valid", 0) / n,
        "mean_searches": statistics.mean(len(s.get("searches") or []) for s in states),
        "reasons": dict(reasons),
        "seconds": time.perf_counter() - t,
    }


def print_table(results: dict[str, dict], model: str, setting: str) -> None:
    cols = [
        ("n", "n", "{:d}"),
        ("answered_share", "answered", "{:.0%}"),
        ("forced_share", "on last turn", "{:.0%}"),
        ("malformed_share", "malformed", "{:.0%}"),
        ("max_turns_share", "max_turns", "{:.0%}"),
        ("invalid_turn_share", "invalid turns", "{:.0%}"),
        ("mean_turns", "turns", "{:.2f}"),
        ("mean_searches", "searches", "{:.2f}"),
        ("em", "EM", "{:.3f}"),
        ("f1", "F1", "{:.3f}"),
        ("judge", "judge", "{:.3f}"),
        ("seconds", "wall s", "{:.0f}"),
    ]
    header = f"{'dataset':<12}" + "".join(f"{title:>14}" for _, title, _ in cols)
    print(f"\nsolver rollout quality -- model {model}, BM25, greedy, {setting}")
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        print(f"{name:<12}" + "".join(f"{fmt.format(r[key]):>14}" for key, _, fmt in cols))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20, help="questions per dataset (the first n of each file)")
    ap.add_argument("--datasets", default="hotpotqa,bamboogle", help="comma-separated names or .jsonl paths")
    ap.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    ap.add_argument(
        "--model", default="embedded-warm", help="'embedded-warm', 'embedded', HF id or directory"
    )
    ap.add_argument(
        "--config",
        default=None,
        help="a run config YAML whose solver section to use (default: "
        "SolverConfig's defaults, the paper's evaluation settings)",
    )
    ap.add_argument("--max-turns", type=int, default=None, help="override the solver's max_turns")
    ap.add_argument(
        "--judge",
        choices=("policy", "none"),
        default="policy",
        help="'policy': exact match, else the solver model judges Correct/Wrong; 'none': exact match",
    )
    ap.add_argument("--concurrency", type=int, default=16, help="rollouts in flight (micro-batched)")
    ap.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (0: the cores not already busy)"
    )
    ap.add_argument("--show", type=int, default=0, help="print the first SHOW rollouts in full")
    ap.add_argument(
        "--proposer", type=int, default=0, help="also run N proposer rollouts on embedded targets"
    )
    ap.add_argument("--json", default=None, help="also write the results (and every rollout) to this file")
    args = ap.parse_args()

    import torch

    from training.warmup.sft import auto_threads

    torch.set_num_threads(args.threads or auto_threads())
    from sesa_graph.config import SolverConfig, load_config
    from sesa_graph.policy.local import LocalPolicy
    from sesa_graph.rollout.judge import Judge, JudgeItem
    from sesa_graph.rollout.loop import RolloutContext, solver_spec
    from tools.backends import make_backend
    from tools.config import SearchConfig
    from tools.config_model import updated

    solver_cfg = load_config(args.config).solver if args.config else SolverConfig()
    if args.max_turns is not None:  # validated as the config key would be (0 or -1 is an error, not 2 turns)
        solver_cfg = updated(solver_cfg, {"max_turns": args.max_turns})
    setting = (f"solver settings of {args.config}" if args.config else "SolverConfig defaults") + (
        f" ({solver_cfg.max_turns} turns, {solver_cfg.max_tokens_per_turn} tokens a turn, "
        f"docs of {solver_cfg.doc_chars} chars, last-turn <answer> forced: {solver_cfg.force_final_answer}), "
        f"judge {args.judge}"
    )
    policy = LocalPolicy(args.model, max_batch_size=args.concurrency, kv_cache_mb=2048)
    judge = Judge(policy if args.judge == "policy" else None)
    ctx = RolloutContext(
        policy=policy, search=make_backend(SearchConfig()), spec=solver_spec(solver_cfg, greedy=True), seed=0
    )
    all_verdicts: list = []
    results: dict[str, dict] = {}
    everything: list[tuple[dict, dict]] = []
    dump = []
    t_all = time.perf_counter()
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        qs = load_questions(Path(args.data_dir), name, args.n)
        t = time.perf_counter()
        states = asyncio.run(run_all([q["question"] for q in qs], ctx, args.concurrency))
        pairs = list(zip(qs, states))
        verdicts = asyncio.run(
            judge.judge_many(
                [
                    JudgeItem(
                        q["question"],
                        s.get("final") if s.get("status") == "answered" else None,
                        q["golden_answers"],
                    )
                    for q, s in pairs
                ]
            )
        )
        results[Path(name).stem] = {**summarize(pairs, verdicts), "seconds": time.perf_counter() - t}
        everything += pairs
        all_verdicts += verdicts
        for (q, s), v in zip(pairs, verdicts):
            dump.append(
                {
                    "dataset": name,
                    "question": q["question"],
                    "golds": q["golden_answers"],
                    "status": s.get("status"),
                    "final": s.get("final"),
                    "n_turns": s.get("n_turns"),
                    "verdict": v.method,
                    "score": v.score,
                    "searches": [x["query"] for x in s.get("searches") or []],
                    "text": policy.tokenizer.decode(s.get("completion_ids") or []),
                }
            )
        if args.json:  # after every dataset, so a long run that dies keeps what it measured
            Path(args.json).write_text(
                json.dumps(
                    {"model": args.model, "setting": setting, "results": results, "rollouts": dump}, indent=1
                )
            )
    if len(results) > 1:
        results["all"] = {**summarize(everything, all_verdicts), "seconds": time.perf_counter() - t_all}
    for row in dump[: args.show]:
        print(
            f"\n=== [{row['dataset']}] {row['question']}  gold={row['golds']}  -> {row['status']}: {row['final']}"
        )
        print(row["text"])
    print_table(results, args.model, setting)
    if args.proposer:
        p = asyncio.run(run_proposer(args.proposer, policy, ctx.search, seed=0))
        results["proposer"] = p
        print(
            f"\nproposer format -- {p['n']} targets: wrote a <question> {p['question_share']:.0%}, "
            f"valid (static checks) {p['valid_share']:.0%}, mean searches {p['mean_searches']:.2f}, "
            f"reasons {p['reasons']}, {p['seconds']:.0f}s"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"model": args.model, "setting": setting, "results": results, "rollouts": dump}, indent=1
            )
        )


if __name__ == "__main__":
    main()
