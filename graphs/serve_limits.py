"""What a served graph's context may name: the files it reads, the servers it calls, how much it keeps.

A LangGraph server (``langgraph dev``, a deployment) builds a run's live parts from the JSON context of a
request (:class:`graphs.studio_config.StudioConfig`), and whoever can reach the server writes that context. So
a context may only name:

- files under the server's roots: the project it serves, ``$SESA_HOME``, and the directories listed in
  ``SESA_SERVE_ROOTS`` (separated by ``os.pathsep``). A path outside them is refused with the same words
  whether it exists or not (a different error would tell the caller which files exist);
- a model that is one of the embedded or fetched names, a directory under the roots, or a hub id listed in
  ``SESA_SERVE_MODELS`` (comma-separated): any other hub id would be downloaded on the caller's say-so;
- servers (``base_url``, ``search_url``) on this machine's loopback, or on hosts listed in
  ``SESA_SERVE_HOSTS`` (comma-separated): otherwise the server POSTs wherever a request says;
- at most ``SESA_SERVE_MAX_MODELS`` (default 2) distinct policies, search backends and judges at once: each
  stays loaded for the server's life (a new model or corpus per request grew a server 1.3 -> 2.5 GB).

The checks of a context's fields are lexical, so they can run on the server's event loop; where a path is
opened (on the build thread) :func:`check_real` checks it again with its links followed.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

PROJECT = Path(__file__).resolve().parents[1]
DEFAULT_MAX_MODELS = 2


def _listed(var: str) -> list[str]:
    return [v.strip() for v in os.environ.get(var, "").split(",") if v.strip()]


def roots() -> list[Path]:
    """The directories a served context may read from."""
    from tools.assets import sesa_home_path

    extra = [Path(p) for p in os.environ.get("SESA_SERVE_ROOTS", "").split(os.pathsep) if p.strip()]
    return [Path(os.path.abspath(p)) for p in (PROJECT, sesa_home_path(), *extra)]


def _outside(field: str, value: str) -> ValueError:
    hub = " (a hub id: list it in SESA_SERVE_MODELS, comma-separated)" if field == "model" else ""
    return ValueError(
        f"context key {field!r}: {value!r} is not under a directory this server may read (the project, "
        "$SESA_HOME, SESA_SERVE_ROOTS). To allow it, add its directory to SESA_SERVE_ROOTS "
        f"(separated by {os.pathsep!r}){hub} in the environment the server starts in"
    )


def _under(path: str, bases: list[Path]) -> bool:
    return any(path == str(b) or path.startswith(str(b).rstrip(os.sep) + os.sep) for b in bases)


def check_path(field: str, value: str) -> None:
    """Refuse ``value`` unless it lies under a root once '..' and '~' are folded (no file is touched)."""
    path = os.path.abspath(os.path.expanduser(value))
    if not _under(path, roots()):
        raise _outside(field, value)


def check_real(field: str, value: str) -> None:
    """:func:`check_path` with symbolic links followed: for the build thread, just before ``value`` is opened."""
    path = os.path.realpath(os.path.expanduser(value))
    if not _under(path, [Path(os.path.realpath(r)) for r in roots()]):
        raise _outside(field, value)


def _named_model(value: str) -> bool:
    """An embedded or fetched model's name, or a hub id the server's operator listed: no path to check."""
    from tools.split_models import SPLIT_MODELS

    return (
        value in ("embedded", "embedded-warm")
        or value in SPLIT_MODELS
        or value in _listed("SESA_SERVE_MODELS")
    )


def check_model(value: str) -> None:
    """A context's ``model``: a known name, a directory under the roots, or a hub id the server allows."""
    if not _named_model(value):
        # a path, or a bare 'org/name' that is a hub id unless such a directory is under the roots (checked on
        # the build thread, check_model_real)
        check_path("model", value)


def check_model_real(value: str) -> None:
    """On the build thread: a ``model`` that is neither a known name nor a listed hub id must be an existing
    directory under the roots, or loading it would download it from the hub."""
    if _named_model(value):
        return
    check_real("model", value)
    if not Path(os.path.expanduser(value)).is_dir():
        raise ValueError(
            f"context key 'model': {value!r} is no model directory under this server's roots; a hub id must be "
            "listed in SESA_SERVE_MODELS (comma-separated) in the environment the server starts in"
        )


def check_url(field: str, value: str) -> None:
    """Refuse a server URL that is not http(s) on loopback or on a host listed in SESA_SERVE_HOSTS."""
    from tools.ports import is_loopback

    parts = urlsplit(value)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        raise ValueError(f"context key {field!r}: {value!r} is not an http(s) URL")
    if not is_loopback(host) and host not in _listed("SESA_SERVE_HOSTS"):
        raise ValueError(
            f"context key {field!r}: {value!r} is not on this machine; this server calls other hosts only when "
            "they are listed in SESA_SERVE_HOSTS (comma-separated) in the environment it starts in"
        )


def max_models() -> int:
    """The most distinct policies (and search backends, and judges) a server keeps loaded at once."""
    raw = os.environ.get("SESA_SERVE_MAX_MODELS", str(DEFAULT_MAX_MODELS))
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"SESA_SERVE_MAX_MODELS={raw!r}: give a whole number of at least 1")
    return n
