"""A step whose searches failed asks the search backend once more before the step is committed.

A rollout whose search failed (after the backend's own retries) ends ``search_error`` and is left out of
training, which is right for a moment's failure. A search server that died makes every later rollout end so,
and a run went on for all its steps and exited 0 with no proposal valid and nothing learned. So after a step
with any failed search the backend is asked one plain query: if that fails too, the run stops before the
step's commit with an error naming the backend, and ``sesa train --resume`` runs the step again once the
server is back.
"""

from __future__ import annotations

from typing import Any

from tools.backends import SearchBackend, SearchUnavailableError

PROBE_QUERY = "search backend health check"


def failed_searches(*roles: list[Any]) -> int:
    """Rollouts of any role that ended because a search failed."""
    return sum(1 for trajectories in roles for t in trajectories if t.status == "search_error")


def check_search_alive(search: SearchBackend, failed: int, step: int) -> None:
    """Raise SearchUnavailableError when ``failed`` > 0 and the backend does not answer a query now."""
    if failed == 0:
        return
    try:
        search.search([PROBE_QUERY], 1)
    except Exception as exc:
        where = getattr(search, "url", None) or getattr(search, "name", type(search).__name__)
        raise SearchUnavailableError(
            f"step {step}: {failed} rollouts ended with a failed search and the search backend ({where}) "
            f"does not answer now ({type(exc).__name__}: {exc}). The run stops before committing step {step}: "
            "start the search server again, then `sesa train --resume`"
        ) from exc
