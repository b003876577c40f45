"""A trainer job or policy server that SIGKILL ended (the kernel's OOM killer, usually) is reported as such, with
the settings that shrink it; any other exit is reported as before."""

import subprocess
import sys
from pathlib import Path

from sesa_graph.policy.vllm_server import server_oom_hint
from training.trainer_jobs import failure_message


def test_a_trainer_killed_by_sigkill_is_named_as_the_oom_killers_likely_victim(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    rc = p.wait()
    assert rc == -9
    log = tmp_path / "solver-trainer.log"
    log.write_text("step 3 ...\n")
    msg = failure_message("solver", rc, log)
    assert msg.startswith(
        "the solver trainer exited with code -9 (probably killed by the kernel's out-of-memory"
    )
    assert "train.micro_batch_size" in msg and "dmesg" in msg and "step 3" in msg
    assert "out-of-memory" not in failure_message("solver", 1, log)  # a Python error says so itself


def test_a_launcher_reporting_a_rank_killed_by_sigkill_gets_the_hint(tmp_path):
    log = tmp_path / "proposer-trainer.log"
    log.write_text(
        "torch.distributed.elastic.multiprocessing.api: failed (exitcode: -9) local_rank: 1\n"
        "Signal 9 (SIGKILL) received by PID 4242\nRoot Cause (first observed failure):\n  rank      : 1\n"
    )
    msg = failure_message("proposer", 1, log)
    assert "rank 1 failed" in msg and "out-of-memory killer" in msg


def test_a_policy_server_killed_by_sigkill_names_its_kv_cache():
    assert "kv_cache_gib" in server_oom_hint(-9) and server_oom_hint(0) == server_oom_hint(1) == ""


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_engine_killed.log"


def test_a_policy_server_whose_engine_was_killed_exits_0_and_still_gets_the_hint(tmp_path):
    """vLLM's API server logs a SIGKILLed engine core and exits 0 (the fixture: a real server's log after
    `kill -9` of its VLLM::EngineCore, 2026-12-03); an engine that failed on its own logs its error."""
    from sesa_graph.policy.vllm_server import ServerSpec, VLLMServer

    log = tmp_path / "server.log"
    log.write_text(FIXTURE.read_text())
    server = VLLMServer(ServerSpec("m", "solver", port=1, log_path=log))
    server.proc = subprocess.Popen([sys.executable, "-c", "pass"])
    server.proc.wait()
    said = server.dead()
    assert said.startswith(
        "the vLLM server for solver (http://127.0.0.1:1) exited with code 0 (probably killed"
    )
    assert "kv_cache_gib" in said
    own_error = (
        "(EngineCore pid=8221) ERROR 12-03 06:40:37 [core.py:1512] EngineCore encountered a fatal error.\n"
    )
    log.write_text(own_error + FIXTURE.read_text())
    assert "out-of-memory" not in server.dead()
    assert server_oom_hint(0, "INFO: Shutting down\n") == ""
