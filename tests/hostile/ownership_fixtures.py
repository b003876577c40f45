"""What the ownership rows set up: run directories as a killed or finished ``sesa train`` leaves them, a
second process that owns one through the real owner lock, look-alike trainer processes recorded in
``sync/trainer_pids.json``, and a snapshot of a directory's files to find anything a refused command changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Self

from tests.training.resume_fixtures import make_run
from training.config_record import record_config
from training.run_owner import LOCK
from training.trainer_jobs import process_start_time

ROOT = Path(__file__).resolve().parents[2]
_HOLD = (
    "import sys; from pathlib import Path; target, kind = Path(sys.argv[1]), sys.argv[2]\n"
    "sys.argv = ['sesa', kind, '--resume' if kind == 'train' else '--name', str(target)]\n"
    "if kind == 'train':\n    from training.run_owner import lock_run as take\n"
    "else:\n    from sesa_eval.records import lock_eval as take\n"
    "lock = take(target); print('ready', flush=True); sys.stdin.read()\n"
)


class Procs:
    """Processes a row starts, each killed (its whole session) when the row ends, whatever happened."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.started:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()

    def owner(self, target: Path, kind: str = "train") -> subprocess.Popen:
        """A process that owns ``target`` (a run, or an eval's output) through the real lock until killed."""
        p = self._start([sys.executable, "-c", _HOLD, str(target), kind], stdout=subprocess.PIPE)
        line = p.stdout.readline() if p.stdout else b""
        assert line.strip() == b"ready", f"the owner process did not start: {line!r}"
        return p

    def sleeper(self, *argv: str) -> subprocess.Popen:
        """A live process whose command line ends with ``argv`` (a look-alike trainer when it names
        ``training.trainer`` and a run directory), in a session of its own as a trainer job is."""
        return self._start([sys.executable, "-c", "import time; time.sleep(120)", *argv])

    def _start(self, cmd: list[str], **kw) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, env=env, start_new_session=True, **kw)
        self.started.append(p)
        return p


def alive(p: subprocess.Popen) -> bool:
    return p.poll() is None


def run_dir(tmp: Path, *, finished: bool = False, recorded: bool = True) -> Path:
    """``tmp/runs/r``: 3 committed steps of 5 (a killed run), or of 3 with both roles' final policies
    (``finished``: a resume has nothing to run); ``recorded``: with the record of its config."""
    run = make_run(
        tmp, steps=3 if finished else 5, committed=3, uncommitted_line=not finished, final=finished
    )
    if finished:
        (run / "policies" / "proposer").mkdir(parents=True)
        (run / "policies" / "proposer" / ".complete").write_text("ok\n")
    if recorded:
        record_config(run)
    return run


def record_trainers(
    run: Path, procs: dict[str, subprocess.Popen], start: dict[str, str] | None = None
) -> None:
    """``sync/trainer_pids.json`` as ``sesa train`` writes it, naming ``procs`` (``start``: other start times)."""
    rec = {
        role: {"pid": p.pid, "start": (start or {}).get(role, process_start_time(p.pid)), "cmd": "x"}
        for role, p in procs.items()
    }
    (run / "sync" / "trainer_pids.json").write_text(json.dumps(rec))


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and directory (None) under ``root``, by relative path."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


def changes(before: dict[str, bytes | None], root: Path) -> tuple[list[str], list[str]]:
    """(gone or changed, added) paths under ``root`` since ``before``."""
    after = snapshot(root)
    lost = [k for k, v in before.items() if k not in after or after[k] != v]
    added = [k for k in after if k not in before and k != LOCK]
    return lost, added
