"""The post-reload check on constructed worker reports: one worker (the CPU server here), tensor-parallel
shards with vLLM's padding, pipeline stages, data-parallel engines and replicated layers. Tensor parallelism
cannot run on this machine; the shard layout comes from vLLM's own index function."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from sesa_graph.policy.weight_check import WeightSyncError, check_reload_results, combine_shards

W = Path("/runs/x/sync/solver")
URL = "http://127.0.0.1:9"


def worker(embed=None, tp=0, tp_size=1, dp=0, dp_size=1, pp=0, version="3", head=None, dtype="float32"):
    fingerprint = {}
    if embed is not None:
        fingerprint["embed"] = {"sum": embed, "shard": tp, "shards": tp_size, "dtype": dtype}
    if head is not None:
        fingerprint["lm_head"] = {"sum": head, "shard": tp, "shards": tp_size, "dtype": dtype}
    rank = {"tp": tp, "tp_size": tp_size, "pp": pp, "pp_size": 1, "dp": dp, "dp_size": dp_size}
    return {
        "version": version,
        "tied_lm_head_refreshed": head is not None,
        "fingerprint": fingerprint,
        "rank": rank,
    }


def check(results, expected=None, version=3):
    return check_reload_results(results, expected or {"embed": 10.0}, version, URL, W)


def test_one_worker_as_on_this_machine():
    info = check([worker(10.0, head=10.0)])
    assert info == {"workers": 1, "tp_size": 1, "dp_checked": [0], "dp_size": 1}
    with pytest.raises(WeightSyncError, match="checksum .* is 9.000000, the files hold 10.000000"):
        check([worker(9.0)])
    with pytest.raises(WeightSyncError, match="tied LM head still holds the old weights"):
        check([worker(10.0, head=7.0)])


def test_a_worker_of_before_the_shard_reports_is_a_whole_layer():
    old = {"version": "3", "tied_lm_head_refreshed": True, "fingerprint": {"embed": 10.0, "lm_head": 10.0}}
    assert check([old])["workers"] == 1
    with pytest.raises(WeightSyncError, match="did not take"):
        check([{**old, "fingerprint": {"embed": 4.0}}])


def test_tensor_parallel_shards_add_up_to_the_file():
    shards = [worker(4.0, tp=0, tp_size=2, head=4.0), worker(6.0, tp=1, tp_size=2, head=6.0)]
    assert check(shards)["tp_size"] == 2
    # each shard alone differs from the file's sum: the old per-worker comparison refused a correct reload
    with pytest.raises(WeightSyncError, match="only embedding shards \\[1\\] of 2"):
        check(shards[1:])
    with pytest.raises(WeightSyncError, match="rank 0, pipeline stage 0.* is 11.0"):
        check([shards[0], worker(7.0, tp=1, tp_size=2)])


def test_each_data_parallel_engine_and_pipeline_stage_is_its_own_copy():
    tp = [worker(4.0, tp=0, tp_size=2, dp=d, dp_size=2) for d in (0, 1)]
    tp += [worker(6.0, tp=1, tp_size=2, dp=d, dp_size=2) for d in (0, 1)]
    assert check(tp)["dp_checked"] == [0, 1]
    stale = tp[:3] + [worker(5.0, tp=1, tp_size=2, dp=1, dp_size=2)]
    with pytest.raises(WeightSyncError, match="data-parallel rank 1"):
        check(stale)
    # vLLM returns the first engine's workers only: checked as far as they go
    assert check(tp[::2]) == {"workers": 2, "tp_size": 2, "dp_checked": [0], "dp_size": 2}
    # a later pipeline stage holds no embedding and is not compared
    stages = [worker(4.0, tp=0, tp_size=2), worker(6.0, tp=1, tp_size=2)]
    stages += [worker(None, tp=t, tp_size=2, pp=1) for t in (0, 1)]
    assert check(stages)["workers"] == 4


def test_a_replicated_layer_must_match_on_every_worker():
    def replicated(s, tp):
        r = worker(s, tp=tp, tp_size=2)
        r["fingerprint"]["embed"].update(shard=0, shards=1)
        return r

    assert check([replicated(10.0, 0), replicated(10.0, 1)])["tp_size"] == 2
    with pytest.raises(WeightSyncError, match="different copies of embedding shard 0 of 1"):
        check([replicated(10.0, 0), replicated(9.0, 1)])


def test_version_and_empty_reports_are_refused():
    with pytest.raises(WeightSyncError, match="version 2 .* expected 3"):
        check([worker(10.0, version="2")])
    with pytest.raises(WeightSyncError, match="worker-extension-cls"):
        check([None])
    with pytest.raises(WeightSyncError, match="worker-extension-cls"):
        check([])


def test_a_server_in_a_narrower_dtype_is_compared_after_the_same_rounding():
    expected = {"embed": 10.0, "embed@bfloat16": 10.25}
    assert check([worker(10.25, dtype="bfloat16")], expected)["workers"] == 1
    with pytest.raises(WeightSyncError):
        check([worker(10.0, dtype="bfloat16")], expected)
    assert check([worker(10.0, dtype="float32")], expected)["workers"] == 1


def test_disagreeing_shard_counts_are_refused():
    with pytest.raises(WeightSyncError, match="disagree"):
        combine_shards([{"sum": 1.0, "shard": 0, "shards": 2}, {"sum": 1.0, "shard": 0, "shards": 1}], "x")
    assert combine_shards([None, None], "x") is None


def test_check_weights_dir_sums_a_float32_embedding_also_rounded(tmp_path):
    import torch
    from safetensors.torch import save_file

    from sesa_graph.policy.weight_check import check_weights_dir

    embed = torch.randn(100, 8) * 0.02 + 0.001
    save_file({"model.embed_tokens.weight": embed}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text("{}")
    got = check_weights_dir(tmp_path)
    assert got["embed"] == pytest.approx(float(embed.double().sum()), rel=1e-12)
    assert got["embed@bfloat16"] == float(embed.to(torch.bfloat16).double().sum())


@pytest.mark.parametrize("tp_size", [1, 2, 4])
def test_worker_shards_without_padding_rows_add_up_to_the_file(tp_size):
    """vLLM's docstring example: 1010 base tokens + 16 added, padded to multiples of 64. Each worker's shard
    is laid out as vLLM lays it out, its padding rows filled with garbage; the worker's sums of real rows
    add up to the whole embedding's."""
    torch = pytest.importorskip("torch")
    vpe = pytest.importorskip("vllm.model_executor.layers.vocab_parallel_embedding")
    from sesa_graph.policy.vllm_worker import _shard_sum

    org, added, dim = 1010, 16, 4
    full = torch.randn(org + added, dim, dtype=torch.float64)
    org_padded = vpe.pad_vocab_size(org, 64)
    total_padded = vpe.pad_vocab_size(org_padded + added, 64)
    reports = []
    for rank in range(tp_size):
        idx = vpe.VocabParallelEmbedding._get_indices(
            total_padded, org_padded, org + added, org, rank, tp_size
        )
        shard = torch.full((idx.num_elements_padded, dim), 1e6, dtype=torch.float64)  # padding: garbage
        shard[: idx.num_org_elements] = full[idx.org_vocab_start_index : idx.org_vocab_end_index]
        start = idx.num_org_elements_padded
        shard[start : start + idx.num_added_elements] = full[
            idx.added_vocab_start_index : idx.added_vocab_end_index
        ]
        layer = SimpleNamespace(weight=shard, shard_indices=idx, tp_rank=rank, tp_size=tp_size)
        reports.append(_shard_sum(layer))
    assert [r["shard"] for r in reports] == list(range(tp_size))
    assert combine_shards(reports, "x") == pytest.approx(float(full.sum()), rel=1e-12)


def test_the_fingerprint_sums_in_blocks_and_equals_the_whole_sum(monkeypatch):
    """A shard is summed in blocks of rows (no fp64 copy of the whole embedding): the same sum, to fp64's
    rounding, as the whole matrix at once, also when the rows do not fill the last block."""
    import torch

    from sesa_graph.policy import vllm_worker

    monkeypatch.setattr(vllm_worker, "FINGERPRINT_BLOCK_ROWS", 7)
    weight = torch.randn(50, 16, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    layer = torch.nn.Embedding(50, 16)
    layer.weight.data = weight
    got = vllm_worker._shard_sum(layer)["sum"]
    assert abs(got - float(weight.double().sum())) <= 1e-9 * max(1.0, abs(got))
