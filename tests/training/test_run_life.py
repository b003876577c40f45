"""An attempt of a run that SIGKILL ended (the out-of-memory killer's way) is named by `sesa train --resume`'s
note and by `sesa runs`: the step it stopped in and the likely cause; attempts that ended say how."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

from typer.testing import CliRunner

from sesa_cli.main import build_app
from training import run_life

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.argv[0] = "sesa"  # how a real `sesa train` reads in /proc/PID/cmdline
    from training import run_life
    run_life.begin(Path(sys.argv[1]), 2)
    print("begun", flush=True)
    time.sleep(60)
    """
)


def _run_dir(tmp_path, steps_done: int):
    run = tmp_path / "runs" / "r"
    (run / "logs").mkdir(parents=True)
    (run / "config.yaml").write_text("name: r\ntrain: {steps: 4}\n")
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(steps_done)))
    return run


def test_a_killed_attempt_is_named_with_its_step_and_cause(tmp_path):
    run = _run_dir(tmp_path, 2)
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(run), "sesa"], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    try:
        assert p.stdout.readline().strip() == "begun"
        assert run_life.diagnose(run, 2) is None  # alive: running, not dead
        assert run_life.status(run).startswith("running (pid")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    note = run_life.diagnose(run, run_life.committed_steps(run))
    assert note is not None and f"pid {p.pid}" in note and "during step 2" in note
    assert "out-of-memory" in note or "Killed process" in note
    listing = CliRunner().invoke(build_app(), ["runs", "--runs-dir", str(tmp_path / "runs")])
    assert listing.exit_code == 0, listing.output
    assert "steps 2/4" in listing.output and "died" in listing.output and "during step 2" in listing.output


def test_attempts_that_ended_say_how(tmp_path):
    run = _run_dir(tmp_path, 1)
    run_life.begin(run, 0)
    run_life.end(run, "stopped", "ServiceError: the judge endpoint is down")
    assert run_life.diagnose(run, 1) is None
    assert run_life.status(run).startswith("stopped") and "judge endpoint" in run_life.status(run)
    run_life.begin(run, 1)
    run_life.end(run, "finished")
    assert [a["ended"]["how"] for a in run_life.attempts(run)] == ["stopped", "finished"]
    bad = CliRunner().invoke(build_app(), ["runs", "--runs-dir", str(tmp_path / "nope")])
    assert bad.exit_code != 0 and "--runs-dir" in bad.output
