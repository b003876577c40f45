"""The format warm-up: output naming (fast) and a real tiny SFT run on the embedded model (slow)."""

from __future__ import annotations

import json
import os
import time

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from sesa_graph.warm_model import EMBEDDED_WARM_DIRNAME, is_complete, warm_dir
from training.warmup.sft import run_warmup


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SESA_HOME", str(tmp_path / "sesa_home"))
    return tmp_path / "sesa_home"


@pytest.mark.parametrize(
    ("model", "dirname"),
    [
        ("embedded", EMBEDDED_WARM_DIRNAME),  # what resolve_policy_model("embedded-warm") reads
        (
            "HuggingFaceTB/SmolLM2-360M-Instruct",
            "smollm2-360m-instruct-warm",
        ),  # hub id: last part, lowercased
        ("/models/My Model/", "my-model-warm"),  # local directory: its name, slugged
    ],
)
def test_warm_dir_names(home, model, dirname):
    assert warm_dir(model) == home / "models" / dirname


def test_warm_dir_refuses_the_warm_model(home):
    with pytest.raises(ValueError, match="already warmed"):
        warm_dir("embedded-warm")


def test_bad_arguments(home):
    with pytest.raises(ValueError, match="examples"):
        run_warmup(examples=0)
    with pytest.raises(ValueError, match="epochs"):
        run_warmup(epochs=0)


def test_a_complete_dir_is_reused_without_training(home):
    out = warm_dir("embedded")
    out.mkdir(parents=True)
    (out / ".complete").write_text("embedded\n")
    from sesa_graph.corpus.heldout import SPLIT_VERSION

    (out / "warmup.json").write_text(json.dumps({"base_model": "embedded", "heldout_split": SPLIT_VERSION}))
    assert run_warmup("embedded", examples=3) == out  # nothing is loaded or trained


@pytest.mark.slow
def test_tiny_sft_run_changes_weights_and_loads(home):
    from safetensors.torch import load_file

    from sesa_graph.embedded import embedded_model_dir, resolve_policy_model
    from sesa_graph.policy.local import LocalPolicy

    out = run_warmup(
        "embedded", examples=3, epochs=1, max_steps=2, grad_accum=1, threads=1, distiller_examples=0
    )
    assert out == home / "models" / EMBEDDED_WARM_DIRNAME and is_complete(out)
    assert not list(out.parent.glob("*.tmp-*"))  # the temporary directory was renamed into place
    summary = json.loads((out / "warmup.json").read_text())
    assert summary["examples"] == 3 and summary["steps"] == 2
    assert summary["end_of_turn_token"] == "<|im_end|>"
    assert summary["first_loss"] is not None and summary["seconds"] > 0
    assert len((out / "warmup_examples.jsonl").read_text().splitlines()) == 3

    base = load_file(str(embedded_model_dir() / "model.safetensors"))
    warm = load_file(str(out / "model.safetensors"))
    assert base.keys() == warm.keys()
    changed = [k for k in base if not (base[k] == warm[k]).all()]
    assert len(changed) > len(base) // 2  # a full fine-tune moves (almost) every tensor

    config = json.loads((out / "config.json").read_text())
    generation = json.loads((out / "generation_config.json").read_text())
    assert config["eos_token_id"] == generation["eos_token_id"] == 2  # <|im_end|>, as in the base model

    assert resolve_policy_model("embedded-warm") == str(out)
    policy = LocalPolicy("embedded-warm")
    assert 2 in policy.eos_ids
    prompt = policy.encode_messages([{"role": "user", "content": "Question: What is the capital of France?"}])
    from sesa_graph.policy import GenerationRequest, SamplingParams

    (res,) = policy.generate_sync(
        [GenerationRequest(prompt_ids=prompt, sampling=SamplingParams(max_tokens=8, temperature=0.0))]
    )
    assert res.token_ids

    # a second call reuses the finished directory
    mtime = (out / "model.safetensors").stat().st_mtime
    t = time.perf_counter()
    assert run_warmup("embedded", examples=3, epochs=1) == out
    assert time.perf_counter() - t < 5 and (out / "model.safetensors").stat().st_mtime == mtime


@pytest.mark.slow
def test_any_small_model_by_path(home, tmp_path):
    """A user-named model (here a tiny random Llama in a local directory) warms up into <name>-warm."""
    from tests.training.trainer_harness import tiny_policy

    src = tiny_policy(tmp_path / "Tiny-Llama", hidden=32)

    out = run_warmup(
        str(src), examples=2, epochs=1, max_steps=1, grad_accum=1, threads=1, distiller_examples=0
    )
    assert out == home / "models" / "tiny-llama-warm" and is_complete(out)
    summary = json.loads((out / "warmup.json").read_text())
    assert summary["base_model"] == str(src) and summary["steps"] == 1
    assert (out / "model.safetensors").exists() and (out / "tokenizer_config.json").exists()


def test_a_warm_model_built_before_the_heldout_split_is_rebuilt(home, monkeypatch):
    """An older warm-up trained on the probe set's articles: it is rebuilt, a current one is reused."""
    from sesa_graph.corpus.heldout import SPLIT_VERSION
    from training.warmup import sft

    built = []

    def fake_train(model, out, **kw):
        built.append(model)
        out.mkdir(parents=True)
        return {"base_model": model, "heldout_split": SPLIT_VERSION}

    monkeypatch.setattr(sft, "_train", fake_train)
    old = warm_dir("embedded")
    old.mkdir(parents=True)
    (old / sft.SUMMARY).write_text(json.dumps({"base_model": "embedded"}))  # no heldout_split: before it
    (old / sft.COMPLETE).write_text("embedded\n")
    assert is_complete(old) and not sft.is_current(old)
    messages = []
    assert run_warmup("embedded", echo=messages.append) == old and built == ["embedded"]
    assert sft.is_current(old) and "held-out split" in messages[0]
    run_warmup("embedded", echo=messages.append)
    assert built == ["embedded"] and messages[-1].startswith("reusing")
