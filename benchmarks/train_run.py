"""Time one `sesa train` and sample the memory of all its processes together.

    .venv/bin/python benchmarks/train_run.py [--interval 2] [--json out.json] -- [sesa train arguments]
    .venv/bin/python benchmarks/train_run.py --shell 'bash scripts/setup.sh && .venv/bin/sesa train'

Samples every process descended from `sesa train` (orchestrator, the warm-up when a first run builds it, both
trainers, both vLLM servers with their engine and worker processes, the llama.cpp server of the fixed models)
every ``--interval`` seconds. Memory is the proportional set size (PSS, /proc/PID/smaps_rollup): shared pages
(torch's libraries, a model file mapped by several processes) count once over the tree, where summed RSS
counted them once per process. Prints the peak of the summed PSS with the processes at that moment, each
process's own peak, the wall time, and the phase split `sesa train` writes to summary.json (start-up,
rollouts, GRPO updates, weight sync). Also each process's CPU seconds (user + system, as of its last sample)
and, in the JSON, their running totals at every sample: where the two cores went.
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


def pss_kib(pid: int | str = "self") -> int:
    """A process's proportional set size in KiB (0 if /proc shows none)."""
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    return next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)


def cpu_s(pid: int | str = "self") -> float:
    """A process's CPU time so far (user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_memory(root: int, measure=pss_kib) -> dict[str, int]:
    """``measure`` (PSS by default) in KiB of ``root`` and all its descendants, keyed by 'pid name'."""
    kids, out, todo = _children(), {}, [root]
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, []))
        try:
            kib = measure(pid)
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if not cmd.strip():  # exiting (a zombie has no command line): keep its last figure under its name
            continue
        name = cmd.split(" -m ")[-1].split()[0] if " -m " in cmd else cmd.split()[0]
        out[f"{pid} {name}"] = kib
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    ap.add_argument(
        "--shell",
        default=None,
        help="Sample this shell command's process tree instead of `sesa train` (e.g. the README's first "
        "command, set-up included), run in the repository root.",
    )
    ap.add_argument("train_args", nargs="*")
    args = ap.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.time()
    cmd = (
        ["bash", "-c", args.shell]
        if args.shell
        else [sys.executable, "-m", "sesa_cli.main", "train", *args.train_args]
    )
    p = subprocess.Popen(cmd, cwd=ROOT if not args.shell else os.getcwd(), env=env)
    peak, peak_at, peak_procs = 0, 0.0, {}
    own_peak: dict[str, int] = {}
    timeline: list[tuple[float, int]] = []  # (seconds, MiB of all processes): where in the run memory peaks
    cpu: dict[str, float] = {}
    cpu_timeline: list[tuple[float, dict[str, float]]] = []
    while p.poll() is None:
        procs = tree_memory(p.pid)
        cpu.update(tree_memory(p.pid, cpu_s))
        cpu_timeline.append((round(time.time() - t0, 1), {k: round(v, 1) for k, v in cpu.items() if v >= 1}))
        timeline.append((round(time.time() - t0, 1), sum(procs.values()) // 1024))
        for name, kib in procs.items():
            own_peak[name] = max(own_peak.get(name, 0), kib)
        total = sum(procs.values())
        if total > peak:
            peak, peak_at, peak_procs = total, time.time() - t0, procs
        time.sleep(args.interval)
    wall = time.time() - t0
    print(f"\nexit {p.returncode}; wall {wall / 60:.0f} min {wall % 60:.0f} s")
    print(f"peak PSS of all processes together: {peak / 1024**2:.2f} GiB at {peak_at:.0f} s; then:")
    for name, kib in sorted(peak_procs.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {kib / 1024:>8.0f} MiB  {name}")
    print("each process's own peak PSS:")
    for name, kib in sorted(own_peak.items(), key=lambda kv: -kv[1])[:16]:
        print(f"  {kib / 1024:>8.0f} MiB  {name}")
    print(f"CPU seconds (user + system), {sum(cpu.values()):.0f} in all:")
    for name, sec in sorted(cpu.items(), key=lambda kv: -kv[1])[:16]:
        print(f"  {sec:>8.0f} s    {name}")
    if args.json:
        out = {
            "exit": p.returncode,
            "wall_s": round(wall, 1),
            "peak_pss_gib": round(peak / 1024**2, 3),
            "peak_at_s": round(peak_at, 1),
            "at_peak_mib": {k: round(v / 1024) for k, v in peak_procs.items()},
            "own_peak_mib": {k: round(v / 1024) for k, v in own_peak.items()},
            "timeline_mib": timeline,
            "cpu_s": {k: round(v, 1) for k, v in cpu.items()},
            "cpu_timeline_s": cpu_timeline,
        }
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    runs = sorted((ROOT / "runs").glob("*/summary.json"), key=lambda f: f.stat().st_mtime)
    if runs and runs[-1].stat().st_mtime > t0:
        summary = json.loads(runs[-1].read_text())
        print(f"{runs[-1].parent}: phases {json.dumps(summary.get('phases', {}))}")


if __name__ == "__main__":
    main()
