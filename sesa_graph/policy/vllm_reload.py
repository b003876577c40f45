"""Reloading a vLLM server's weights in place, for servers this process started (:mod:`vllm_server`) and for
servers on other nodes that someone started with ``sesa policy serve`` (:class:`RemoteVLLMPolicy`).

One reload of one server, over its HTTP root and with its token: pause (requests in flight finish on the old
weights), ``/collective_rpc sesa_reload`` (the worker extension of :mod:`sesa_graph.policy.vllm_worker` loads
the weights in place and re-ties a tied LM head), reset the prefix cache (cached key/values were computed by
the old weights), resume, then check that every worker serves the expected version and embedding
(:mod:`sesa_graph.policy.weight_check`).

A server on another node cannot read the orchestrator's disk, so it is told where to *fetch* the weights
instead: the orchestrator's coordinator (a ``torch.distributed.TCPStore``) and the key prefix the trainer sent
them under. Its workers fetch them into a node-local cache
(:func:`sesa_graph.policy.vllm_worker.fetch_cached`) and load them from there; the checksum they must report
still comes from the orchestrator's own copy of the same files. After the reload the cache is emptied again,
so a server node keeps no copy of the weights between steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from sesa_graph.policy.openai_client import OpenAIPolicy
from sesa_graph.policy.weight_check import WeightSyncError, check_reload_results, check_weights_dir

log = logging.getLogger(__name__)

# called as reloader(weights_dir, version, expected=...) -> what the server now serves
Reloader = Callable[..., dict[str, Any]]


def auth_headers(token: str | None) -> dict[str, str]:
    """What every request but /health must carry to a server guarded by ``token``."""
    return {"Authorization": f"Bearer {token}"} if token and token != "EMPTY" else {}


def reload_server(
    root_url: str,
    token: str | None,
    weights_dir: str | Path,
    version: int | None = None,
    expected: dict[str, float] | None = None,
    *,
    fetch: dict[str, Any] | None = None,
    timeout_s: float = 300.0,
) -> dict[str, Any]:
    """Make the server at ``root_url`` (``http://host:port``, no ``/v1``) serve the weights in
    ``weights_dir`` (a ``save_pretrained`` safetensors directory on this machine).

    Without ``fetch`` the server loads ``weights_dir`` itself, so it must see this filesystem. With ``fetch``
    (``{"host", "port", "prefix"}``: the coordinator and the prefix the weights were sent under) the server
    fetches its own copy; ``weights_dir`` is then this machine's copy of the same files, which the check
    compares against. A directory that is incomplete is refused before the server is touched. After the
    reload the server must report ``version`` (default: the directory's ``VERSION`` file) and the directory's
    embedding checksum (``expected``: :func:`check_weights_dir`'s, when already computed), else
    :class:`WeightSyncError`.
    """
    import httpx

    weights_dir = Path(weights_dir).resolve()
    if expected is None:
        expected = check_weights_dir(weights_dir)
    if version is None:
        version = _read_version(weights_dir)
    kwargs: dict[str, Any] = {"weights_path": str(weights_dir)}
    if fetch is not None:
        # the server's own cache is keyed by its URL, so replicas on one node never replace each other's copy
        kwargs = {"fetch": {**fetch, "slot": root_url}}
    t0 = time.perf_counter()
    # a fresh connection per call: after an error vLLM's server may close one, and /resume must still land
    fresh = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(
        base_url=root_url, timeout=timeout_s, headers=auth_headers(token), limits=fresh
    ) as http:
        _post(http, "/pause", params={"mode": "wait"})
        try:
            out = _post(http, "/collective_rpc", json={"method": "sesa_reload", "kwargs": kwargs})
            _post(http, "/reset_prefix_cache")
        finally:
            _post(http, "/resume")
            if fetch is not None:
                _forget(http, kwargs["fetch"])
    where = f"{root_url} (fetched from {fetch['host']}:{fetch['port']})" if fetch else root_url
    checked = check_reload_results(out.get("results") or [], expected, version, where, weights_dir)
    info = {"version": version, "seconds": round(time.perf_counter() - t0, 3), **checked}
    log.info("%s now serves %s version %s (%.2fs)", root_url, weights_dir, version, info["seconds"])
    return info


def _forget(http: Any, fetch: dict[str, Any]) -> None:
    """Empty the server's fetch cache; a failure only costs its node disk, so it is logged, not raised."""
    try:
        _post(http, "/collective_rpc", json={"method": "sesa_drop_fetched", "kwargs": {"fetch": fetch}})
    except Exception as exc:  # noqa: BLE001 - the reload's own outcome is what the caller must see
        log.warning(
            "%s kept its fetched weights (%s); they are replaced at the next reload", http.base_url, exc
        )


def reload_each(
    name: str,
    labels: Sequence[str],
    reloaders: Sequence[Reloader],
    weights_dir: str | Path,
    version: int | None,
) -> dict[str, Any]:
    """Reload every replica of ``name`` side by side (``reloaders[i]`` reloads the one ``labels[i]`` names)
    and check each. One replica: its own report. A replica that fails is named, and the role then serves
    mixed weights, so the caller must stop."""
    weights_dir = Path(weights_dir).resolve()
    expected = check_weights_dir(weights_dir)  # read once, not once per replica
    if len(reloaders) == 1:
        return reloaders[0](weights_dir, version, expected=expected)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(reloaders)) as pool:
        futures = [pool.submit(r, weights_dir, version, expected=expected) for r in reloaders]
    infos, failed = [], []
    for label, fut in zip(labels, futures, strict=True):
        try:
            infos.append(fut.result())
        except Exception as exc:  # noqa: BLE001 - each replica's failure is reported, none hidden
            failed.append(f"{label}: {exc}")
    if failed:
        ok = len(reloaders) - len(failed)
        mixed = f"{ok} did, so the role now serves mixed weights" if ok else "none did"
        raise WeightSyncError(
            f"{len(failed)} of {len(reloaders)} replicas of {name} did not take {weights_dir} ({mixed}):\n"
            + "\n".join(failed)
        )
    return {
        "version": infos[0]["version"],
        "seconds": round(time.perf_counter() - t0, 3),
        "replicas": [info["seconds"] for info in infos],
    }


def replica_label(roots: Sequence[str], i: int) -> str:
    """How an error names replica ``i`` of the servers at ``roots``."""
    return f"replica {i + 1} of {len(roots)} ({roots[i]})" if len(roots) > 1 else roots[i]


def root_of(base_url: str) -> str:
    """A vLLM server's HTTP root from its OpenAI base URL (``http://h:8000/v1`` -> ``http://h:8000``)."""
    url = base_url.rstrip("/")
    if not url.endswith("/v1"):
        raise ValueError(
            f"base_url {base_url!r} does not end in /v1: a reloadable vLLM server is given by its OpenAI "
            "root, e.g. http://10.0.0.3:8000/v1"
        )
    return url.removesuffix("/v1")


def _read_version(weights_dir: Path) -> int | None:
    f = weights_dir / "VERSION"
    return int(f.read_text().strip()) if f.exists() else None


def _post(http: Any, path: str, **kw: Any) -> Any:
    r = http.post(path, **kw)
    if r.status_code != 200:
        raise WeightSyncError(f"POST {http.base_url}{path} -> HTTP {r.status_code}: {_reason(r)}")
    try:
        return r.json()
    except ValueError:
        return {}


def _reason(r: Any) -> str:
    """vLLM's error message (with a worker's exception, which its wrappers quote), or the body's start."""
    try:
        message = r.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return r.text[:300]
    return str(message)[:1000]


class RemoteVLLMPolicy(OpenAIPolicy):
    """An :class:`OpenAIPolicy` on vLLM servers someone else started with ``sesa policy serve`` (one, or
    replicas of one model), possibly on other nodes, whose weights it reloads in place; it owns no process.

    ``fetches_weights``: the orchestrator hands :meth:`reload` the coordinator and the prefix the weights were
    sent under, and each server fetches them itself (no shared filesystem).

    :meth:`dead` is always None: a server this process did not start is not watched. A health probe over the
    network at every poll of the orchestrator's wait would stop a run on a passing network blip; a server
    that really died fails the next request after its retries (``deadline_s``), or the next reload, with an
    error naming its URL.
    """

    fetches_weights = True

    def __init__(self, base_url: str | Sequence[str], model: str, **kwargs: Any) -> None:
        """``kwargs``: :class:`OpenAIPolicy`'s (tokenizer, api_key -- the servers' token --, limits)."""
        super().__init__(base_url, model, **kwargs)
        self.roots = [root_of(u) for u in self.base_urls]
        self.token = kwargs.get("api_key")
        # one reload includes each server's fetch over the network: 15 GiB a policy at 8B in bf16
        self.reload_timeout_s = 1800.0

    def check_servers(self) -> None:
        """Refuse, at start, servers whose reload cannot work: the token must reach the dev-mode routes and
        the workers must have the project's extension (``sesa policy serve`` starts both)."""
        import httpx

        for i, root in enumerate(self.roots):
            try:
                with httpx.Client(base_url=root, timeout=60.0, headers=auth_headers(self.token)) as http:
                    results = _post(http, "/collective_rpc", json={"method": "sesa_ranks"}).get("results")
            except (httpx.HTTPError, WeightSyncError) as exc:
                results = exc
            if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
                raise WeightSyncError(
                    f"{replica_label(self.roots, i)} cannot be reloaded (reload: true): "
                    f"/collective_rpc sesa_ranks answered {results!r}. Start it with `sesa policy serve` "
                    "(the project's worker extension; off loopback --allow-remote and --api-key-env with "
                    "the token this run's api_key_env holds)"
                )

    def reload(
        self, path: str | Path, version: int | None = None, fetch: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Serve the weights in ``path`` (this machine's copy) on every replica; with ``fetch``
        (``{"host", "port", "prefix"}``) each server fetches the same files from the coordinator itself,
        without it each reads ``path`` (a filesystem they share with this machine)."""
        reloaders = [
            partial(reload_server, root, self.token, fetch=fetch, timeout_s=self.reload_timeout_s)
            for root in self.roots
        ]
        labels = [replica_label(self.roots, i) for i in range(len(self.roots))]
        return reload_each(self.name, labels, reloaders, path, version)

    def dead(self) -> str | None:
        return None
