"""What ``langgraph.json`` serves: the three graphs, each behind a graph factory that checks a run's context.

langgraph-api drops every context key the graph's context schema does not list before the graph sees the
context, so a misspelled key (``max_turn``) ran silently with the default. The server hands a graph factory
the run's context before that filter (``ServerRuntime.context``, for a run being executed), so the factory
refuses an unknown key there, naming it and the known ones (:func:`graphs.studio_config.check_keys`). The
graphs themselves are built once; the factory only checks and returns them.
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk.runtime import ServerRuntime

from graphs.propose import graph as propose_graph
from graphs.selfplay import graph as selfplay_graph
from graphs.solve import graph as solve_graph
from graphs.studio_config import check_keys, coerce


def checked(runtime: Any) -> None:
    """Refuse a run whose context holds a key the served graphs do not know, or names a file, model or server
    beyond the server's limits (graphs.serve_limits); reads have no context."""
    context = getattr(runtime, "context", None)
    if isinstance(context, dict):
        check_keys(context)
        coerce(context)


def solve(runtime: ServerRuntime) -> Any:
    checked(runtime)
    return solve_graph


def propose(runtime: ServerRuntime) -> Any:
    checked(runtime)
    return propose_graph


def selfplay(runtime: ServerRuntime) -> Any:
    checked(runtime)
    return selfplay_graph
