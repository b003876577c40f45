"""PolicyConfig.chat_template_kwargs: the trained policies render every prompt with them, on each backend's
client (vLLM servers this run starts, an OpenAI-compatible endpoint, in-process transformers), so the GPU
configs' {enable_thinking: false} reaches Qwen3's template; a fixed model's `serve:` refuses them."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from sesa_graph.model_config import EndpointConfig, PolicyConfig
from sesa_graph.policy import factory

sys.path.insert(0, str(Path(__file__).parent))  # thinking_model.py

from thinking_model import THINK_OPEN, thinking_model_dir

OFF = {"enable_thinking": False}
CHAT = [{"role": "user", "content": "Who wrote Elektra?"}]


@pytest.fixture(scope="module")
def thinking(tmp_path_factory):
    return str(thinking_model_dir(tmp_path_factory.mktemp("thinking")))


def _opens_think(client) -> bool:
    return client.tokenizer.decode(client.encode_messages(CHAT)).endswith(THINK_OPEN)


class FakeServer:
    """What ServedPolicy reads of a started vLLM server; nothing runs."""

    def __init__(self, spec):
        self.spec = spec
        self.base_url = "http://127.0.0.1:9/v1"
        self.root_url = "http://127.0.0.1:9"

    def start(self, wait=True):
        return self

    def wait_healthy(self):
        pass


def test_started_vllm_servers_and_endpoints_render_with_the_policys_kwargs(thinking, monkeypatch):
    from sesa_graph.policy import vllm_server

    monkeypatch.setattr(vllm_server, "VLLMServer", FakeServer)
    monkeypatch.setattr(
        factory,
        "server_spec",
        lambda cfg, *a, **k: SimpleNamespace(served_name=cfg.model, max_model_len=4096),
    )
    served = factory.make_policy(PolicyConfig(model=thinking, chat_template_kwargs=OFF))
    assert served.chat_template_kwargs == OFF and not _opens_think(served)
    assert _opens_think(factory.make_policy(PolicyConfig(model=thinking)))  # Qwen3's default: thinking on

    monkeypatch.setattr(factory, "probe_endpoint", lambda *a, **k: None)
    endpoint = PolicyConfig(
        model=thinking, backend="openai", base_url="http://127.0.0.1:9/v1", chat_template_kwargs=OFF
    )
    assert not _opens_think(factory.make_policy(endpoint))


def test_in_process_policy_renders_with_the_policys_kwargs(thinking):
    local = factory.make_policy(
        PolicyConfig(model=thinking, backend="local", kv_cache_mb=0, chat_template_kwargs=OFF)
    )
    assert not _opens_think(local)
    local.chat_template_kwargs = {}
    assert _opens_think(local)


def test_a_fixed_models_serve_refuses_template_kwargs_and_names_the_roles_keys():
    with pytest.raises(ValidationError, match="judge.chat_template_kwargs"):
        EndpointConfig(serve=PolicyConfig(chat_template_kwargs=OFF))
