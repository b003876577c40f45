"""A step with failed searches asks the search backend once more before its commit: a server that is back
lets the run go on, one that is gone stops it with the backend's URL and the resume command (a run whose search
server died went on for all its steps and exited 0)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tools.backends import SearchUnavailableError
from tools.bm25 import BM25Backend
from tools.corpus import Doc
from tools.http import HttpBackend
from tools.server import running_server
from training.search_health import check_search_alive, failed_searches

DOCS = [Doc(id=str(i), title=t, text=f"{t} is a place.") for i, t in enumerate(["Paris", "Rome", "Oslo"])]


def _rollouts(*statuses):
    return [SimpleNamespace(status=s) for s in statuses]


def test_failed_searches_of_both_roles_are_counted():
    assert failed_searches(_rollouts("search_error", "answered"), _rollouts("search_error", "max_turns")) == 2
    assert failed_searches(_rollouts("answered"), []) == 0


def test_a_live_server_lets_the_step_go_on_and_a_dead_one_stops_the_run():
    with running_server(BM25Backend(DOCS)) as url:
        backend = HttpBackend(url, timeout_s=2, retries=1, backoff_s=0.01)
        check_search_alive(backend, 3, step=2)  # failures a moment ago; answering now
    check_search_alive(backend, 0, step=3)  # nothing failed: nothing asked, even of a dead server
    with pytest.raises(SearchUnavailableError) as err:
        check_search_alive(backend, 4, step=3)
    msg = str(err.value)
    assert "step 3: 4 rollouts ended with a failed search" in msg and url in msg
    assert "before committing step 3" in msg and "sesa train --resume" in msg
