"""The embedded default's judge and distiller are a fetched model; where it is missing a role with a fallback
goes on with it (and says so), one without stops with the fetch command."""

from __future__ import annotations

from importlib.util import find_spec

import pytest

from sesa_graph.config import load_config
from sesa_graph.fixed_models import with_fallbacks
from tools.errors import UserError


@pytest.fixture
def bare_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SESA_HOME", str(tmp_path))
    return tmp_path


QWEN = {"judge.kind": "model", "distiller.endpoint": "qwen", "distiller.fallback": "frozen"}


def test_the_default_config_offers_the_fetched_model():
    cfg = load_config(None, QWEN)
    assert (cfg.judge.kind, cfg.judge.endpoint, cfg.judge.fallback) == ("model", "qwen", "exact")
    assert (cfg.distiller.endpoint, cfg.distiller.fallback) == ("qwen", "frozen")
    assert cfg.models["qwen"].serve.model == "qwen2.5-coder-1.5b"
    assert cfg.models["qwen"].serve.backend == "llama.cpp"
    assert cfg.memory.consolidate_every == 1 and cfg.memory.failure_source == "all"


def test_missing_model_falls_back_loudly(bare_home):
    cfg, notes = with_fallbacks(load_config(None, QWEN))
    assert cfg.judge.kind == "none" and cfg.distiller.endpoint == "frozen"
    assert len(notes) == 2 and all("sesa models fetch qwen2.5-coder-1.5b" in n for n in notes)
    assert "exact match alone" in notes[0] and "models.frozen" in notes[1]


def test_a_fetched_model_is_kept(bare_home):
    """The llama.cpp-served default needs the verified GGUF itself (and the built server); a local 0.5B needs
    its converted directory."""
    from tools.split_models import SPLIT_MODELS, gguf_dir

    spec = SPLIT_MODELS["qwen2.5-coder-1.5b"]
    gguf_dir().mkdir(parents=True)
    with open(gguf_dir() / spec.filename, "wb") as f:
        f.truncate(spec.size)  # sparse: the size is checked, the marker stands for the hash
    (gguf_dir() / (spec.filename + ".verified")).write_text(spec.sha256 + "\n")
    cfg, notes = with_fallbacks(load_config(None, QWEN))
    if find_spec("llama_cpp") is None:
        assert all("llama-cpp-python" in n and "llama_cpp_build.sh" in n for n in notes) and len(notes) == 2
    else:
        assert notes == [] and cfg.judge.kind == "model" and cfg.distiller.endpoint == "qwen"
    local = {**QWEN, "models.qwen.serve": {"model": "qwen2.5-coder-0.5b", "backend": "local"}}
    assert len(with_fallbacks(load_config(None, local))[1]) == 2
    (bare_home / "models" / "qwen2.5-coder-0.5b-instruct").mkdir(parents=True)
    (bare_home / "models" / "qwen2.5-coder-0.5b-instruct" / ".complete").write_text("x\n")
    assert with_fallbacks(load_config(None, local))[1] == []


def test_without_a_fallback_the_run_stops_with_the_fetch_command(bare_home):
    cfg = load_config(None, {**QWEN, "judge.fallback": None})
    with pytest.raises(
        UserError, match=r"judge.endpoint models.qwen .* `sesa models fetch qwen2.5-coder-1.5b`"
    ):
        with_fallbacks(cfg)
    cfg = load_config(None, {**QWEN, "distiller.fallback": None})
    with pytest.raises(UserError, match="set distiller.fallback"):
        with_fallbacks(cfg)


def test_a_fallback_must_be_a_defined_model():
    with pytest.raises(UserError, match="distiller.fallback is 'nope'"):
        load_config(None, {"distiller.fallback": "nope"})
    with pytest.raises(UserError, match="judge.fallback is 'gone'"):
        load_config(None, {**QWEN, "judge.fallback": "gone"})
