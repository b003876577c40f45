"""`sesa policy serve --engine local`: the port is bound (loopback by default) before the model loads."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from sesa_cli.main import build_app


class _Loaded(Exception):
    pass


@pytest.fixture
def no_model(monkeypatch):
    """Loading the model is where the command must never get to when the port is taken."""

    def load(*args, **kwargs):
        raise _Loaded("the model was loaded")

    monkeypatch.setattr("sesa_graph.policy.local.LocalPolicy", load)


def test_a_taken_port_fails_at_once_naming_it(no_model):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(
            build_app(), ["policy", "serve", "--engine", "local", "--port", str(port)]
        )
    assert result.exit_code == 2, result.output
    assert f"port {port} on 127.0.0.1 is already in use" in result.output
    assert not isinstance(result.exception, _Loaded)


def test_it_binds_loopback_unless_told_otherwise(monkeypatch):
    bound = {}

    def serve_app(app, sock):
        bound["addr"] = sock.getsockname()
        sock.close()

    monkeypatch.setattr("sesa_graph.policy.local.LocalPolicy", lambda *a, **k: object())
    monkeypatch.setattr("sesa_graph.policy.serve.build_app", lambda policy, name: name)
    monkeypatch.setattr("tools.server.serve_app", serve_app)
    args = ["policy", "serve", "--engine", "local", "--port", "0", "--served-name", "solver"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert bound["addr"][0] == "127.0.0.1"
    assert "serving 'solver' at http://127.0.0.1:" in result.output


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7"])
def test_the_local_engine_refuses_any_host_but_loopback_before_it_binds_or_loads(no_model, host):
    """It has no token, so beyond loopback anyone who reached it could use it; the vLLM engine is the one to
    serve other machines (--allow-remote with a token)."""
    result = CliRunner().invoke(build_app(), ["policy", "serve", "--engine", "local", "--host", host])
    assert result.exit_code == 2, result.output
    assert f"--host {host}: the local engine serves loopback only" in result.output
    assert "--api-key-env" in result.output and not isinstance(result.exception, _Loaded)
