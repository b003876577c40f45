"""Time one `sesa train` and sample the resident memory of all its processes together.

    .venv/bin/python benchmarks/train_run.py [--interval 2] -- [sesa train arguments, e.g. --name bench]

Samples every process descended from `sesa train` (orchestrator, both trainers, both vLLM servers with their
engine and worker processes) every ``--interval`` seconds and prints the peak of their summed RSS, the
largest process at that moment, the wall time, and the phase split `sesa train` writes to summary.json
(start-up, rollouts, GRPO updates, weight sync).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(proc.name))
    return kids


def rss_kib(pid: int | str = "self") -> int:
    """A process's resident size in KiB (0 if /proc shows none)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)


def tree_rss(root: int) -> dict[str, int]:
    """RSS in KiB of ``root`` and all its descendants, keyed by 'pid name'."""
    kids, out, todo = _children(), {}, [root]
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, []))
        try:
            rss = rss_kib(pid)
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        name = cmd.split(" -m ")[-1].split()[0] if " -m " in cmd else (cmd.split() or ["?"])[0]
        out[f"{pid} {name}"] = rss
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("train_args", nargs="*")
    args = ap.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.time()
    p = subprocess.Popen(
        [sys.executable, "-m", "sesa_cli.main", "train", *args.train_args], cwd=ROOT, env=env
    )
    peak, peak_at, peak_procs = 0, 0.0, {}
    while p.poll() is None:
        procs = tree_rss(p.pid)
        total = sum(procs.values())
        if total > peak:
            peak, peak_at, peak_procs = total, time.time() - t0, procs
        time.sleep(args.interval)
    wall = time.time() - t0
    print(f"\nexit {p.returncode}; wall {wall / 60:.0f} min {wall % 60:.0f} s")
    print(f"peak RSS of all processes together: {peak / 1024**2:.1f} GiB at {peak_at:.0f} s")
    for name, rss in sorted(peak_procs.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {rss / 1024:>8.0f} MiB  {name}")
    runs = sorted((ROOT / "runs").glob("*/summary.json"), key=lambda f: f.stat().st_mtime)
    if runs and runs[-1].stat().st_mtime > t0:
        summary = json.loads(runs[-1].read_text())
        print(f"{runs[-1].parent}: phases {json.dumps(summary.get('phases', {}))}")


if __name__ == "__main__":
    main()
