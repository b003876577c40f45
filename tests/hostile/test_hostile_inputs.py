"""The bad-input suite, run as CI runs it: one process under a memory cap; every row must end clear or
handled (``python -m tests.hostile.run`` prints the table)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_hostile_input_ends_clear_or_handled(tmp_path):
    out = tmp_path / "rows.jsonl"
    res = subprocess.run(
        [sys.executable, "-m", "tests.hostile.run", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert out.exists(), res.stderr[-4000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert not lines[-1].get("started"), f"the suite died in {lines[-1]}: {res.stderr[-4000:]}"
    rows = [r for r in lines if "verdict" in r]
    bad = [
        f"{r['area']}: {r['name']}: {r['verdict']} ({r['detail']})"
        for r in rows
        if r["verdict"] not in ("clear", "handled")
    ]
    assert len(rows) >= 150, len(rows)
    assert not bad, "\n".join(bad)
