"""One start-up at a time on a GPU (issue 45, finding 2): vLLM sizes its KV cache from the device's free memory
before and after its profile, so a second server or a trainer loading on the same GPU meanwhile mis-sizes it or
trips its assert. Servers and trainers on different GPUs, and CPU ones, still start side by side."""

from pathlib import Path

import pytest

from sesa_graph.config import load_config
from sesa_graph.model_config import PolicyConfig
from sesa_graph.policy import factory, vllm_server
from sesa_graph.policy.gpu_share import ALL, gpus_of, share_a_gpu, trainers_share_server_gpus

ROOT = Path(__file__).resolve().parents[2]


def test_which_processes_share_a_gpu():
    assert gpus_of("cpu", "0") is None
    assert gpus_of("cuda", None) is ALL and gpus_of("cuda", "") is ALL
    assert gpus_of("cuda", "2, 3") == {"2", "3"} and gpus_of("cuda:1", None) == {"1"}
    assert share_a_gpu(ALL, frozenset({"5"})) and share_a_gpu(frozenset({"0", "1"}), frozenset({"1"}))
    assert not share_a_gpu(frozenset({"0"}), frozenset({"1"})) and not share_a_gpu(None, ALL)


def test_the_configs_trainers_wait_for_the_servers_only_on_a_shared_gpu():
    assert trainers_share_server_gpus(load_config(ROOT / "configs" / "qwen3-4b-h200.yaml"))
    assert not trainers_share_server_gpus(load_config(ROOT / "configs" / "qwen3-4b-8xa100.yaml"))
    assert not trainers_share_server_gpus(load_config(ROOT / "configs" / "tiny-cpu.yaml"))


@pytest.fixture
def events(monkeypatch):
    log: list[str] = []

    class Server:
        def __init__(self, spec):
            self.name = Path(spec.log_path).stem

        def start(self, wait=True):
            log.append(f"start {self.name}")
            return self

        def wait_healthy(self):
            if f"healthy {self.name}" not in log:
                log.append(f"healthy {self.name}")

        def stop(self):
            pass

    monkeypatch.setattr(vllm_server, "VLLMServer", Server)
    monkeypatch.setattr(vllm_server, "ServedPolicy", lambda servers, **kw: servers)
    return log


def _specs(tmp_path: Path, device: str) -> list:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    return [
        (PolicyConfig(model=str(model), backend="vllm", device=device), None, tmp_path / f"{name}.log")
        for name in ("solver", "proposer", "judge")
    ]


def test_servers_on_one_gpu_start_one_after_another(tmp_path, events):
    factory.make_policies(_specs(tmp_path, "cuda"), gpus=["0", "0", "7"])
    assert events == [
        "start solver",
        "healthy solver",
        "start proposer",  # GPU 7 is the judge's own: it starts beside the proposer
        "start judge",
        "healthy proposer",
        "healthy judge",
    ]


def test_cpu_servers_start_side_by_side(tmp_path, events):
    factory.make_policies(_specs(tmp_path, "cpu"))
    assert events == [
        "start solver",
        "start proposer",
        "start judge",
        "healthy solver",
        "healthy proposer",
        "healthy judge",
    ]


def test_sesa_train_starts_the_trainers_after_the_servers_on_a_shared_gpu(tmp_path, monkeypatch):
    from training import launch, orchestrator

    order: list[str] = []

    class Trainers:
        def __init__(self, *a):
            pass

        def start(self):
            order.append("trainers")

        def dead(self):
            return None

        def stop(self):
            pass

    class Orchestrator:
        def __init__(self, *a, **kw):
            order.append("servers")
            raise KeyboardInterrupt  # the order is all this test needs

    monkeypatch.setattr(launch, "TrainerProcesses", Trainers)
    monkeypatch.setattr(launch, "ensure_models", lambda cfg: None)
    monkeypatch.setattr(launch, "_nothing_to_run", lambda *a: False)
    monkeypatch.setattr(orchestrator, "Orchestrator", Orchestrator)
    for config, expected in (("qwen3-4b-h200", ["servers"]), ("qwen3-4b-8xa100", ["trainers", "servers"])):
        order.clear()
        run = tmp_path / config
        run.mkdir()
        (run / "config.yaml").write_text((ROOT / "configs" / f"{config}.yaml").read_text())
        with pytest.raises(KeyboardInterrupt):
            launch._run_attempt(load_config(run / "config.yaml"), run, 0, False)
        assert order == expected, config
