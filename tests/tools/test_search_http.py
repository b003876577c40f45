import json
import socket
import time

import httpx
import pytest

from tools.backends import SearchUnavailableError, make_backend
from tools.bm25 import BM25Backend
from tools.config import SearchConfig
from tools.http import HttpBackend
from tools.server import running_server


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_round_trip_through_real_server(small_docs):
    local = BM25Backend(small_docs)
    with running_server(local) as url:
        remote = make_backend(SearchConfig(backend="http", url=url, retries=0))
        queries = ["iron tower in Paris", "", "German opera composer"]
        got = remote.search(queries, k=2)
        assert got == local.search(queries, k=2)  # ids, titles, texts and scores survive the round trip
        assert got[1] == []

        status = httpx.get(f"{url}/status").json()
        assert status["backend"] == "bm25" and status["corpus_size"] == 5 and status["uptime_s"] >= 0

        # Search-R1 clients that do not ask for scores get bare documents
        bare = httpx.post(f"{url}/retrieve", json={"queries": ["mountain"], "topk": 1}).json()
        assert bare == {"result": [[{"id": "3", "contents": f'"Mount Everest"\n{small_docs[3].text}'}]]}


def test_dead_server_retries_then_names_url():
    url = f"http://127.0.0.1:{closed_port()}"
    backend = HttpBackend(url, timeout_s=1, retries=2, backoff_s=0.01)
    start = time.monotonic()
    with pytest.raises(SearchUnavailableError, match=rf"{url}/retrieve.*3 attempts"):
        backend.search(["anything"])
    assert time.monotonic() - start >= 0.03  # backoff 0.01 then 0.02


def mock_backend(responses: list[httpx.Response], retries: int = 3) -> tuple[HttpBackend, list]:
    seen = []

    def handler(request):
        seen.append(json.loads(request.content))
        return responses[len(seen) - 1]

    backend = HttpBackend("http://search.test", retries=retries, backoff_s=0)
    backend.client = httpx.Client(transport=httpx.MockTransport(handler))
    return backend, seen


def test_5xx_is_retried_4xx_is_not():
    ok = httpx.Response(200, json={"result": [[{"document": {"id": 1, "contents": '"T"\nx'}, "score": 2}]]})
    backend, seen = mock_backend([httpx.Response(503), ok])
    assert [(d.id, d.title, d.text, d.score) for d in backend.search(["q"], k=1)[0]] == [("1", "T", "x", 2.0)]
    assert seen == [{"queries": ["q"], "topk": 1, "return_scores": True}] * 2

    backend, seen = mock_backend([httpx.Response(422, text="bad")])
    with pytest.raises(SearchUnavailableError, match="HTTP 422"):
        backend.search(["q"])
    assert len(seen) == 1


def test_malformed_answer_is_an_error():
    backend, _ = mock_backend([httpx.Response(200, json={"result": [["oops"]]})])
    with pytest.raises(SearchUnavailableError, match="malformed"):
        backend.search(["q"])


def test_blank_queries_send_nothing():
    backend, seen = mock_backend([])
    assert backend.search(["", "  "]) == [[], []]
    assert seen == []
