"""How each attempt of a run ended, including the ends nobody could report.

A ``sesa train`` killed by SIGKILL (the kernel's out-of-memory killer, usually: the largest process of a run is
often the orchestrator itself) writes nothing: its batch log just stops. So every attempt is recorded in
``runs/NAME/logs/attempts.json`` as it starts (pid, host, first step) and again as it ends (finished, stopped
with the error's first line, interrupted). An attempt that has no end while its pid is gone died without a
word: :func:`diagnose` says so, with the step it stopped in (the first one not committed) and the likely cause,
and ``sesa train --resume`` and ``sesa runs`` print it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from sesa_graph.fsutil import write_json_atomic

ATTEMPTS = Path("logs") / "attempts.json"


def attempts(run_dir: Path) -> list[dict[str, Any]]:
    """Every recorded attempt of ``run_dir``, oldest first ([] for a run from before they were recorded)."""
    try:
        data = json.loads((run_dir / ATTEMPTS).read_text())
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


def begin(run_dir: Path, start_step: int) -> None:
    """Record that this process starts an attempt of ``run_dir`` at ``start_step``."""
    rows = attempts(run_dir)
    rows.append(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "start_step": start_step,
            "ended": None,
        }
    )
    (run_dir / ATTEMPTS).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / ATTEMPTS, rows)


def end(run_dir: Path, how: str, detail: str = "") -> None:
    """Record how this process's attempt ended: 'finished', 'stopped' (``detail``: the error) or 'interrupted'."""
    rows = attempts(run_dir)
    for row in reversed(rows):
        if row.get("pid") == os.getpid() and row.get("ended") is None:
            row["ended"] = {"how": how, "at": time.strftime("%Y-%m-%d %H:%M:%S"), "detail": detail[:300]}
            try:
                write_json_atomic(run_dir / ATTEMPTS, rows)
            except OSError as exc:  # a full disk, often why the run stopped: the error itself is what to show
                logging.getLogger(__name__).warning("could not record the attempt's end: %s", exc)
            return


def _alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"sesa" in cmdline  # a reused pid belongs to some other program


def _kernel_says(pid: int) -> str | None:
    """The kernel log's out-of-memory line for ``pid``, where this user may read the log."""
    try:
        out = subprocess.run(["dmesg"], check=False, capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in out.splitlines() if f"Killed process {pid} " in ln]
    return lines[-1] if lines else None


def diagnose(run_dir: Path, committed: int) -> str | None:
    """A message when the last attempt of ``run_dir`` died without recording an end (``committed``: steps
    committed so far, so the step it was in is the next one); None when it ended, still runs, or was never
    recorded."""
    rows = attempts(run_dir)
    if not rows or rows[-1].get("ended") is not None:
        return None
    last = rows[-1]
    pid = int(last.get("pid", 0))
    if last.get("host") == socket.gethostname() and _alive(pid):
        return None
    kernel = _kernel_says(pid) if last.get("host") == socket.gethostname() else None
    cause = (
        f"the kernel log says: {kernel}"
        if kernel
        else "most likely the kernel's out-of-memory killer (SIGKILL leaves no message; `dmesg | grep -i "
        "'killed process'` shows it where the kernel log is readable)"
    )
    return (
        f"the attempt started {last.get('started')} (sesa train, pid {pid} on {last.get('host')}) died without "
        f"a word during step {committed} (steps 0..{committed - 1} are committed): {cause}. If it was memory: "
        "lower train.micro_batch_size, the policies' kv_cache_gib, or set train.probe_every 0, and see `sesa "
        "train --help` on the memory check"
    )


def committed_steps(run_dir: Path) -> int:
    """How many steps are committed in a row from step 0: the first step a resume runs."""
    from training.metrics_log import read_metrics

    steps, n = set(read_metrics(run_dir).steps), 0
    while n in steps:
        n += 1
    return n


def status(run_dir: Path) -> str:
    """One line: how the run's last attempt stands (finished, running, stopped and why, died without a word)."""
    rows = attempts(run_dir)
    if not rows:
        return "finished" if (run_dir / "summary.json").is_file() else "no attempt recorded"
    last = rows[-1]
    ended = last.get("ended")
    if ended is None:
        note = diagnose(run_dir, committed_steps(run_dir))
        return f"died: {note}" if note else f"running (pid {last.get('pid')} on {last.get('host')})"
    detail = f": {ended['detail']}" if ended.get("detail") else ""
    return f"{ended['how']} {ended.get('at', '')}{detail}"
