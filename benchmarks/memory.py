"""Skill-memory benchmark on the embedded MiniLM and a local Chroma PersistentClient, CPU.

Prints: the time to build an 800-skill bank (15 seeds + 785 synthetic priming skills); top-3 retrieval
for a batch of 64 questions (the first 64 shared HotpotQA questions) against it, p50/p95 with and
without query embedding; crediting 320 rollouts (64 questions x G=5, one ``apply_outcomes`` batch);
the bank's size on disk; and, with ``--distiller``, the wall time of one consolidation of 30 failures.

    .venv/bin/python benchmarks/memory.py [--reps 20] [--distiller local|openai:MODEL@URL|module:factory]

``consolidation_seconds(client, ...)`` takes any PolicyClient (or langchain chat model) for the
distiller timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from sesa_graph.memory import MemoryConfig, Skill, SkillBank
from sesa_graph.memory.consolidation import distill_pass
from sesa_graph.memory.queue import FailureQueue
from sesa_graph.memory.skill import write_skill_file
from tools.encoder import Encoder
from training.run_disk import tree_bytes

QUESTIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "benchmarks" / "hotpotqa.jsonl"

_DOMAINS = [
    "film",
    "music",
    "sports",
    "politics",
    "geography",
    "chemistry",
    "literature",
    "aviation",
    "military",
    "architecture",
    "religion",
    "television",
    "painting",
    "economics",
    "biology",
    "astronomy",
    "law",
    "education",
    "railways",
    "fashion",
    "video games",
    "theatre",
    "medicine",
    "mythology",
    "linguistics",
]
_RELATIONS = [
    "founders",
    "birthplaces",
    "release years",
    "successors",
    "owners",
    "capitals",
    "award winners",
    "headquarters",
    "spouses",
    "members",
    "populations",
    "first appearances",
    "origins",
    "rankings",
    "translations",
    "locations",
    "predecessors",
    "adaptations",
    "nicknames",
    "durations",
    "sponsors",
    "casts",
    "authors",
    "heights",
    "budgets",
    "graduates",
    "coaches",
    "languages",
    "borders",
    "editions",
    "sequels",
    "patrons",
]
_ACTIONS = [
    "compare the two dates",
    "check the disambiguation page",
    "read the infobox",
    "search the list article",
    "confirm the years of activity",
    "look for the original title",
    "verify the spelling",
    "follow the link to the parent entity",
    "count the entries",
    "check the timeline",
]


def synthetic_skills(n: int, seed: int = 0) -> list[Skill]:
    rng = random.Random(seed)
    combos = [(d, r) for d in _DOMAINS for r in _RELATIONS]
    rng.shuffle(combos)
    out = []
    for i, (d, r) in enumerate(combos[:n]):
        a, b = rng.sample(_ACTIONS, 2)
        out.append(
            Skill(
                id=f"m-synth-{i:04d}",
                category="other",
                source="mined",
                description=f"For {d} questions about {r}, {a}, then {b} before answering.",
                trigger=f"Questions on {r} in {d}.",
                avoid=f"Confusing {r} of related {d} entities.",
                queries=[f"[{d} entity] {r}"],
            )
        )
    return out


def p50_p95(seconds: list[float]) -> str:
    p50, p95 = np.percentile(np.asarray(seconds) * 1000, [50, 95])
    return f"p50 {p50:8.2f} ms   p95 {p95:8.2f} ms"


def timed(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def consolidation_seconds(
    client, bank: SkillBank, n: int = 30, questions: list[str] | None = None
) -> tuple[float, dict]:
    """Wall time of one consolidation pass of ``n`` failures with ``client`` as the distiller (nothing is
    committed); returns (seconds, report)."""
    qs = (questions or [f"Which treaty ended war number {i}?" for i in range(n)])[:n]
    queue = FailureQueue(None, cap=n)
    queue.add(
        [
            {
                "question": q,
                "answer": "unknown",
                "golds": ["?"],
                "searches": [q[:40]],
                "status": "answered",
                "retrieved_skill_ids": [s.id for s in hits],
            }
            for q, hits in zip(qs, bank.retrieve(qs))
        ]
    )
    skills, matrix, tombs = bank.embedding_snapshot(0)
    t = time.perf_counter()
    res = asyncio.run(
        distill_pass(queue.pick(n), skills, matrix, tombs, client, bank.encoder, bank.config, step=0)
    )
    return time.perf_counter() - t, res.report()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20, help="repetitions per timing")
    ap.add_argument(
        "--distiller", default=None, help="also time a 30-failure consolidation with this distiller"
    )
    args = ap.parse_args()

    questions = [json.loads(x)["question"] for x in QUESTIONS.read_text().splitlines()[:64]]
    encoder = Encoder("embedded")
    encoder.encode_queries(["warm up"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_skill_file(tmp / "synthetic.yaml", synthetic_skills(787))
        t = time.perf_counter()
        bank = SkillBank.create(tmp / "bank", MemoryConfig(priming_files=[tmp / "synthetic.yaml"]), encoder)
        build = time.perf_counter() - t
        print(
            f"bank: {len(bank)} skills (15 seeds + {len(bank) - 15} synthetic priming; "
            f"{bank.state['priming'][0]['skipped_duplicates']} near-duplicates skipped), built in {build:.1f} s "
            f"(embedding included)"
        )

        emb = encoder.encode_queries(questions)
        hits = bank.retrieve(questions)
        assert len(hits) == 64 and all(len(h) == 3 for h in hits)
        print(
            f"retrieve top-3, batch of 64 questions, with query embedding:    "
            f"{p50_p95(timed(lambda: bank.retrieve(questions), args.reps))}"
        )
        print(
            f"retrieve top-3, batch of 64 questions, embeddings precomputed:  "
            f"{p50_p95(timed(lambda: bank.query(emb), args.reps))}"
        )

        rng = random.Random(0)
        outcomes = [
            ([s.id for s in h], rng.random() < 0.3, rng.choice(["answered"] * 8 + ["max_turns", "malformed"]))
            for h in hits
            for _ in range(5)
        ]
        counts = bank.apply_outcomes(outcomes)
        print(
            f"apply_outcomes, 320 rollouts ({counts['skills_updated']} skills updated, one batch, skills.jsonl "
            f"rewritten): {p50_p95(timed(lambda: bank.apply_outcomes(outcomes), args.reps))}"
        )
        bank.close()
        path = tmp / "bank"
        print(
            f"bank on disk: {tree_bytes(path) / 2**20:.1f} MiB total (chroma/ {tree_bytes(path / 'chroma') / 2**20:.1f} "
            f"MiB, skills.jsonl {(path / 'skills.jsonl').stat().st_size / 2**10:.0f} KiB)"
        )

        if args.distiller:
            from sesa_cli.bank import load_distiller

            bank = SkillBank.open(path, MemoryConfig(), encoder)
            seconds, report = consolidation_seconds(load_distiller(args.distiller), bank, 30, questions[:30])
            print(
                f"consolidation of 30 failures with {args.distiller}: {seconds:.1f} s wall; admitted "
                f"{report['admitted']}, rejected {report['rejected']}, distiller errors {report['distiller_errors']}"
            )
            bank.close()
        else:
            print("consolidation timing: pass --distiller local (or openai:MODEL@URL) to measure it")


if __name__ == "__main__":
    main()
