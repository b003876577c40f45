"""How often the judge agrees with a person: a labelled set of (question, golds, prediction, correct?) pairs,
judged the way a run judges (exact match first, the configured model on a miss).

    .venv/bin/python benchmarks/judge_agreement.py [--pairs benchmarks/data/judge_pairs.jsonl]
        [--config configs/tiny-cpu.yaml] [--set judge.endpoint=frozen] [--json out.json]

Prints precision and recall of "Correct" (overall, and for the model's verdicts alone), the confusion
counts per kind of pair (paraphrase, alias, near miss, wrong, solver: a real solver answer), how many
verdicts came from exact match, the model or neither (judge_unavailable), and the model's latency: one
call alone, and per call when a step's misses arrive together (one batch).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

from sesa_cli.common import parse_overrides
from sesa_graph.config import load_config
from sesa_graph.policy.factory import make_judge, start_models
from sesa_graph.rollout.judge import JudgeItem
from sesa_graph.scoring import exact_match

PAIRS = Path(__file__).resolve().parent / "data" / "judge_pairs.jsonl"


def precision_recall(rows: list[tuple[bool, bool]]) -> tuple[float | None, float | None]:
    """(precision, recall) of the positive class from (label, verdict) pairs; None where undefined."""
    tp = sum(1 for label, said in rows if label and said)
    fp = sum(1 for label, said in rows if not label and said)
    fn = sum(1 for label, said in rows if label and not said)
    return (tp / (tp + fp) if tp + fp else None), (tp / (tp + fn) if tp + fn else None)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--config", default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="Config override.")
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = ap.parse_args()
    cfg = load_config(args.config, parse_overrides(args.set))
    if cfg.judge.kind != "model":
        raise SystemExit(f"judge kind is {cfg.judge.kind!r}: this measures a judge model (kind 'model')")
    pairs = [json.loads(line) for line in args.pairs.read_text().splitlines() if line.strip()]
    t0 = time.perf_counter()
    _, fixed = start_models([], {cfg.judge.endpoint: cfg.models[cfg.judge.endpoint]})
    judge = make_judge(cfg.judge, None, models=fixed)
    load_s = time.perf_counter() - t0
    items = [JudgeItem(p["question"], p["prediction"], p["golds"]) for p in pairs]
    misses = [i for i, it in enumerate(items) if not exact_match(it.prediction, it.golds)]
    t1 = time.perf_counter()
    asyncio.run(judge.judge_many([items[misses[0]]]))
    single_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    verdicts = asyncio.run(judge.judge_many(items))
    batch_s = time.perf_counter() - t2
    for client in fixed.values():
        # a served model stops; an in-process one has nothing to stop
        getattr(client, "close", lambda: None)()
    rows = [(bool(p["label"]), v.correct) for p, v in zip(pairs, verdicts)]
    model_rows = [(bool(p["label"]), v.correct) for p, v in zip(pairs, verdicts) if v.method == "llm"]
    by_kind: dict[str, Counter] = defaultdict(Counter)
    for p, v in zip(pairs, verdicts):
        by_kind[p["kind"]][("T" if p["label"] else "F") + ("c" if v.correct else "w")] += 1
    prec, rec = precision_recall(rows)
    mprec, mrec = precision_recall(model_rows)
    methods = Counter(v.method for v in verdicts)
    out = {
        "model": cfg.models[cfg.judge.endpoint].serve.model if cfg.models[cfg.judge.endpoint].serve else None,
        "pairs": len(pairs),
        "correct_labels": sum(1 for p in pairs if p["label"]),
        "precision": prec,
        "recall": rec,
        "model_precision": mprec,
        "model_recall": mrec,
        "agreement": sum(1 for label, said in rows if label == said) / len(rows),
        "methods": dict(methods),
        "by_kind": {k: dict(c) for k, c in sorted(by_kind.items())},
        "load_s": round(load_s, 1),
        "single_call_s": round(single_s, 2),
        "disagreements": [
            {
                **{k: p[k] for k in ("question", "golds", "prediction", "label")},
                "said": v.correct,
                "by": v.method,
            }
            for p, v in zip(pairs, verdicts)
            if v.correct != bool(p["label"])
        ],
        "batch_s_per_call": round(
            batch_s / max(1, methods.get("llm", 0) + methods.get("judge_unavailable", 0)), 2
        ),
    }
    print(
        f"{out['model']} on {len(pairs)} pairs ({out['correct_labels']} labelled Correct): precision "
        f"{_fmt(prec)}, recall {_fmt(rec)}, agreement {out['agreement']:.2f}; the model's verdicts alone "
        f"({len(model_rows)}): precision {_fmt(mprec)}, recall {_fmt(mrec)}"
    )
    print(f"verdicts by method: {dict(methods)}")
    print("per kind (T/F = label Correct/Wrong, c/w = judged Correct/Wrong):")
    for kind, c in sorted(by_kind.items()):
        print(f"  {kind:<11} " + "  ".join(f"{k}={c[k]}" for k in ("Tc", "Tw", "Fc", "Fw")))
    print(
        f"latency: load {load_s:.0f} s; one call alone {single_s:.2f} s; {len(misses)} misses judged "
        f"together {batch_s:.1f} s ({out['batch_s_per_call']} s a call)"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
