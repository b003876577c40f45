"""The warm-up's compute dtype: bf16 autocast from the resolved dtype, float32 weights and saved model (fast:
a 2-layer random Llama with a 64-word tokenizer, 2 optimizer steps)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from training.warmup import sft


def test_config_bf16_follows_the_resolved_compute_dtype(tmp_path):
    kw = {"max_length": 32, "device": "cpu"}
    bf16 = sft.sft_config_kwargs(tmp_path, compute_dtype="bfloat16", **kw)
    fp32 = sft.sft_config_kwargs(tmp_path, compute_dtype="float32", **kw)
    assert bf16["bf16"] is True and bf16["use_cpu"] is True
    assert fp32["bf16"] is False
    assert {k: v for k, v in bf16.items() if k != "bf16"} == {k: v for k, v in fp32.items() if k != "bf16"}
    with pytest.raises(ValueError, match="resolved"):
        sft.sft_config_kwargs(tmp_path, compute_dtype="auto", **kw)


def test_run_warmup_passes_the_switch_and_records_it(tmp_path, monkeypatch):
    seen = []

    def fake_train(model, out, **kw):
        seen.append(kw["compute_dtype"])
        out.mkdir(parents=True)
        return {"base_model": model, "heldout_split": "x", "compute_dtype": kw["compute_dtype"]}

    monkeypatch.setattr(sft, "_train", fake_train)
    out = sft.run_warmup("embedded", out=tmp_path / "w", compute_dtype="float32")
    assert seen == ["float32"] and sft.read_summary(out)["compute_dtype"] == "float32"
    sft.run_warmup("embedded", out=tmp_path / "w2")
    assert seen[-1] == "auto"  # resolved inside _train, next to the device
    with pytest.raises(ValueError, match="compute_dtype"):
        sft.run_warmup("embedded", out=tmp_path / "w3", compute_dtype="float16")


def test_is_current_ignores_the_compute_dtype(tmp_path):
    """A warm model built before the switch (no compute_dtype in warmup.json) or with the other dtype is reused."""
    from sesa_graph.corpus.heldout import SPLIT_VERSION

    for i, extra in enumerate(({}, {"compute_dtype": "float32"}, {"compute_dtype": "bfloat16"})):
        d = tmp_path / str(i)
        d.mkdir()
        (d / sft.COMPLETE).write_text("embedded\n")
        (d / sft.SUMMARY).write_text(json.dumps({"heldout_split": SPLIT_VERSION, **extra}))
        assert sft.is_current(d)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> sft.WarmupData:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<pad>", "<s>", "</s>"] + [f"w{i}" for i in range(61)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )
    cfg = LlamaConfig(
        vocab_size=len(words),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    src = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(cfg).save_pretrained(src)
    tok.save_pretrained(src)
    encoded = [
        {"input_ids": [1, *range(3 + i, 20 + i), 2], "completion_mask": [0] * 6 + [1] * 13} for i in range(4)
    ]
    return sft.WarmupData("tiny", str(src), tok, 2, [], encoded, 0.0)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_bf16_compute_keeps_float32_weights(tiny, tmp_path, dtype):
    import torch
    from safetensors.torch import load_file

    warm = sft.build_trainer(tiny, tmp_path / "_trainer", compute_dtype=dtype, max_steps=2, grad_accum=1)
    trainer = warm.trainer
    assert trainer.args.bf16 is (dtype == "bfloat16")
    assert trainer.accelerator.mixed_precision == ("bf16" if dtype == "bfloat16" else "no")
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    computed = set()
    hook = trainer.model.model.layers[0].mlp.down_proj.register_forward_hook(
        lambda mod, args, out: computed.add(out.dtype)
    )
    try:
        warm.train()
    finally:
        hook.remove()
    assert computed == {getattr(torch, dtype)}  # the matmuls ran in the compute dtype
    params = dict(trainer.model.named_parameters())
    assert {p.dtype for p in params.values()} == {torch.float32}  # master weights stay float32
    assert any(not torch.equal(before[n], params[n]) for n in before)  # and were updated
    assert trainer.state.global_step == 2

    warm.save(tmp_path / "out")
    saved = load_file(str(Path(tmp_path / "out" / "model.safetensors")))
    assert {t.dtype for t in saved.values()} == {torch.float32}
    assert json.loads((tmp_path / "out" / "config.json").read_text())["eos_token_id"] == 2


def test_cli_switch(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import sesa_cli.warmup as cli
    from sesa_cli.main import build_app

    calls = []

    def fake_run_warmup(*args, **kw):
        calls.append(kw["compute_dtype"])
        return tmp_path

    monkeypatch.setattr(cli, "run_warmup", fake_run_warmup)
    runner, app = CliRunner(), build_app()
    assert runner.invoke(app, ["warmup", "--compute-dtype", "float32"]).exit_code == 0
    assert runner.invoke(app, ["warmup"]).exit_code == 0
    assert calls == ["float32", "auto"]
    bad = runner.invoke(app, ["warmup", "--compute-dtype", "float16"])
    assert bad.exit_code != 0 and not calls[2:]


def test_scoring_only_the_trained_positions_changes_no_loss(tiny, tmp_path):
    """TRL's fused LM head limited to the labelled positions (a CPU speed-up) trains to the same losses."""
    import torch
    import trl.trainer.utils as trl_utils

    original = trl_utils._use_triton
    with sft.trained_positions_only() as patched:
        assert patched, "this TRL's fused LM head changed: trained_positions_only no longer applies"
        assert trl_utils._use_triton(torch.device("cpu")) is True
    assert trl_utils._use_triton is original

    losses, norms = {}, {}
    for only in (False, True):
        warm = sft.build_trainer(
            tiny,
            tmp_path / str(only),
            compute_dtype="float32",
            max_steps=2,
            grad_accum=1,
            score_trained_only=only,
        )
        warm.train()
        hist = [h for h in warm.trainer.state.log_history if "loss" in h]
        losses[only], norms[only] = [h["loss"] for h in hist], [h["grad_norm"] for h in hist]
    assert trl_utils._use_triton is original  # restored after training
    assert losses[True] == pytest.approx(losses[False], abs=1e-5)
    assert norms[True] == pytest.approx(norms[False], rel=1e-4)
