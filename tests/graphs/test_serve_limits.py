"""What a served graph's context may name (graphs.serve_limits): files under the server's roots only, with the
same refusal whether the file exists or not; models it knows or was told to allow; servers on loopback unless
allowed; and a bounded number of loaded models."""

from __future__ import annotations

import asyncio
import os

import pytest

from graphs import defaults, serve_limits
from graphs.studio_config import coerce


@pytest.fixture(autouse=True)
def _no_operator_settings(monkeypatch):
    for var in ("SESA_SERVE_ROOTS", "SESA_SERVE_MODELS", "SESA_SERVE_HOSTS", "SESA_SERVE_MAX_MODELS"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("field", ["run_config", "corpus", "bank", "model"])
def test_a_path_outside_the_roots_is_refused_alike_whether_it_exists_or_not(field):
    messages = []
    for path in ("/etc/hostname", "/etc/no-such-file-here"):
        with pytest.raises(ValueError, match=f"context key '{field}'.*not under a directory") as err:
            coerce({field: path})
        messages.append(str(err.value).replace(path, "PATH"))
    assert messages[0] == messages[1]
    with pytest.raises(ValueError, match="SESA_SERVE_ROOTS"):
        coerce({field: str(serve_limits.PROJECT / ".." / ".." / "etc" / "passwd")})  # '..' is folded first


def test_the_operator_adds_roots_and_a_link_out_of_them_is_refused_where_it_is_opened(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_text('{"id": "1", "contents": "\\"T\\"\\ntext"}\n')
    (data / "escape.jsonl").symlink_to("/etc/hostname")
    with pytest.raises(ValueError, match="SESA_SERVE_ROOTS"):
        coerce({"corpus": str(data / "corpus.jsonl")})
    monkeypatch.setenv("SESA_SERVE_ROOTS", os.pathsep.join(["/nonexistent-root", str(data)]))
    assert coerce({"corpus": str(data / "corpus.jsonl")}).corpus == str(data / "corpus.jsonl")
    coerce({"corpus": str(data / "escape.jsonl")})  # lexically inside: the event loop touches no file
    serve_limits.check_real("corpus", str(data / "corpus.jsonl"))
    with pytest.raises(ValueError, match="context key 'corpus'.*not under a directory"):
        serve_limits.check_real("corpus", str(data / "escape.jsonl"))


def test_a_hub_id_loads_only_when_the_operator_lists_it(monkeypatch):
    for name in ("embedded", "embedded-warm", "qwen2.5-coder-1.5b"):
        serve_limits.check_model_real(name)
    coerce({"model": "Qwen/Qwen3-4B"})  # could be a directory under the project: decided where it loads
    with pytest.raises(ValueError, match="SESA_SERVE_MODELS"):
        serve_limits.check_model_real("Qwen/Qwen3-4B")
    monkeypatch.setenv("SESA_SERVE_MODELS", "Qwen/Qwen3-0.6B, Qwen/Qwen3-4B")
    serve_limits.check_model_real("Qwen/Qwen3-4B")


def test_servers_off_this_machine_only_when_listed(monkeypatch):
    assert coerce({"base_url": "http://127.0.0.1:8000/v1", "search_url": "http://localhost:9"}).base_url
    for field in ("base_url", "search_url"):
        with pytest.raises(ValueError, match=f"'{field}'.*not on this machine.*SESA_SERVE_HOSTS"):
            coerce({field: "http://10.1.2.3:8000/v1"})
        with pytest.raises(ValueError, match="not an http"):
            coerce({field: "file:///etc/passwd"})
    monkeypatch.setenv("SESA_SERVE_HOSTS", "retrieval.lab")
    assert coerce({"search_url": "http://retrieval.lab:8000"}).search_url


def test_loaded_models_are_capped_and_plain_data_is_bounded(monkeypatch):
    monkeypatch.setattr(defaults, "_built", {})
    monkeypatch.setattr(defaults, "_policy", lambda *a: object())
    monkeypatch.setattr(defaults, "_search", lambda *a: object())

    async def parts(**ctx):
        return await defaults.parts({"engine": "local", **ctx})

    asyncio.run(parts())
    asyncio.run(parts(model="other"))
    with pytest.raises(ValueError, match=r"already holds 2 policy configurations.*SESA_SERVE_MAX_MODELS=2"):
        asyncio.run(parts(model="third"))
    asyncio.run(parts(max_turns=3))  # the same policy under another budget: no new model
    for turns in range(1, 21):
        asyncio.run(parts(max_turns=turns))
    assert sum(k[0] == "config" for k in defaults._built) == defaults.LIGHT_KEPT
    monkeypatch.setenv("SESA_SERVE_MAX_MODELS", "3")
    asyncio.run(parts(model="third"))
    monkeypatch.setenv("SESA_SERVE_MAX_MODELS", "lots")
    with pytest.raises(ValueError, match="SESA_SERVE_MAX_MODELS='lots'"):
        asyncio.run(parts(model="fourth"))
