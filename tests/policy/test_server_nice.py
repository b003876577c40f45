"""A started server takes the niceness its config gives (PolicyConfig.nice): the fixed model's llama.cpp server of
the default run yields the cores to the trainers' updates."""

import os
import subprocess
import sys
from pathlib import Path

from sesa_graph.config import load_config
from sesa_graph.policy.factory import llama_spec, server_spec
from sesa_graph.policy.llama_server import LlamaServer
from sesa_graph.policy.vllm_server import VLLMServer

CHILD = """import os
group = open("/proc/self/autogroup").read().split()[-1] if os.path.exists("/proc/self/autogroup") else "none"
print(os.nice(0), group)
"""


def _niceness_in_child(server) -> int:
    """The child's nice, checked against its autogroup's where the kernel has autogroups: the server starts
    in a session of its own, which is its own autogroup, and there only the group's nice yields the cores."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        preexec_fn=server._child_setup,
        start_new_session=True,  # as the server's own Popen
        capture_output=True,
        text=True,
        check=True,
    )
    nice, group = out.stdout.split()
    assert group in ("none", str(server.spec.nice)), out.stdout
    return int(nice)


def test_the_server_process_runs_at_its_configs_niceness(tmp_path):
    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml")
    serve = cfg.models["qwen"].serve
    assert serve.nice == 10  # the default run's distiller and judge wait for the trainers
    base = _niceness_in_child(VLLMServer(server_spec(cfg.solver_policy, "solver")))
    assert base == os.nice(0)  # the policies' servers keep this process's priority
    spec = llama_spec(serve, tmp_path / "llama.log", None)
    assert spec.nice == 10
    assert _niceness_in_child(LlamaServer(spec)) == min(19, base + 10)
