"""What the distiller makes of real failures: one consolidation pass over a file of failure records, through
the product's path (the fixed model as the run starts it, the bank with its seeds in Chroma, the
embedder, the parser and the admission checks).

    .venv/bin/python benchmarks/distiller_quality.py [--failures tests/fixtures/distiller_failures.jsonl]
        [--model qwen] [--config configs/tiny-cpu.yaml] [--limit 8] [--json out.json]

Prints candidates written / parseable / admitted / rejected by reason, the seconds the pass took, and
every admitted skill verbatim (and each rejected output's reason and first characters).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from sesa_graph.config import load_config
from sesa_graph.memory.memory import SkillMemory
from sesa_graph.memory.queue import FailureRecord
from sesa_graph.policy.factory import role_client, start_models
from tools.terminal import shown

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "distiller_failures.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--failures", type=Path, default=FIXTURE, help="JSONL of failure records.")
    ap.add_argument("--model", default=None, help="A key of the config's models: (default: the distiller's).")
    ap.add_argument("--config", default=None)
    ap.add_argument("--limit", type=int, default=8, help="Failures sent in the one pass.")
    ap.add_argument("--json", type=Path, default=None, help="Also write the report here.")
    args = ap.parse_args()
    cfg = load_config(args.config)
    key = args.model or cfg.distiller.endpoint
    records = [FailureRecord(**json.loads(line)) for line in args.failures.read_text().splitlines() if line]
    mem_cfg = cfg.memory.model_copy(
        update={"consolidate_min_pending": 1, "max_distill_per_pass": args.limit, "failure_source": "all"}
    )
    t0 = time.perf_counter()
    _, fixed = start_models([], {key: cfg.models[key]})
    client = role_client(
        "distiller",
        key,
        cfg.distiller.chat_template_kwargs,
        fixed,
        None,
        max_tokens=mem_cfg.distiller_max_tokens,
        temperature=mem_cfg.distiller_temperature,
    )
    loaded = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        memory = SkillMemory.create(Path(tmp) / "bank", mem_cfg, distiller=client)
        before = len(memory.bank)
        memory.add_failures(records[: args.limit])
        t1 = time.perf_counter()
        memory.maybe_consolidate(1, force=True)
        report = memory.commit(1, wait=True, timeout=1800)
        secs = time.perf_counter() - t1
        admitted = [memory.bank.get(i) for i in report.admitted]
        rejected = sum(report.rejected.values())
        out = {
            "model": key,
            "load_s": round(loaded, 1),
            "pass_s": round(secs, 1),
            "written": report.responses,
            "parseable": report.responses - report.rejected.get("unparseable", 0),
            "admitted": len(admitted),
            "rejected": report.rejected,
            "bank": [before, len(memory.bank)],
            "rejected_examples": report.rejected_examples,
            "skills": [
                s.model_dump(include={"description", "trigger", "avoid", "queries", "category"})
                for s in admitted
            ],
        }
        memory.close()
    for client_ in fixed.values():
        getattr(client_, "close", lambda: None)()
    print(
        f"{key}: loaded in {loaded:.0f} s; one pass of {report.picked} failures in {secs:.0f} s: written "
        f"{out['written']}, parseable {out['parseable']}, admitted {len(admitted)}, rejected {rejected} "
        f"{dict(report.rejected)}; bank {before} -> {out['bank'][1]}"
    )
    for s in out["skills"]:
        print(f"- [{s['category']}] {shown(s['description'])}")
        print(
            f"    when: {shown(s['trigger'])} | avoid: {shown(s['avoid'])} | queries: {shown('; '.join(s['queries']))}"
        )
    for r in out["rejected_examples"]:
        print(f"  rejected ({r['reason']}): {shown(r['output'][:300])}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
