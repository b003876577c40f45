"""The retrieval server validates each request (422 naming the field), keeps a failing query from
failing the others, and binds loopback unless told otherwise."""

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from tools.bm25 import BM25Backend
from tools.server import HostError, bind_socket, create_app


@pytest.fixture
def client(small_docs):
    return TestClient(create_app(BM25Backend(small_docs), max_topk=10, max_queries=3, max_query_chars=50))


@pytest.mark.parametrize(
    ("body", "loc", "msg"),
    [
        ({"queries": ["x"], "topk": 0}, ["body", "topk"], "between 1 and 10"),
        ({"queries": ["x"], "topk": -3}, ["body", "topk"], "between 1 and 10"),
        ({"queries": ["x"], "topk": 10**30}, ["body", "topk"], "between 1 and 10"),
        ({"queries": ["x"], "topk": "3"}, ["body", "topk"], "integer"),
        ({"queries": ["x"], "topk": 2.5}, ["body", "topk"], "integer"),
        ({"queries": ["x", None]}, ["body", "queries", 1], "string"),
        ({"queries": [5]}, ["body", "queries", 0], "string"),
        ({"queries": "x"}, ["body", "queries"], "list"),
        ({"queries": ["a"] * 4}, ["body", "queries"], "at most 3"),
        ({"queries": ["ok", "y" * 51]}, ["body", "queries", 1], "at most 50"),
        ({"topk": 1}, ["body", "queries"], "required"),
        ({"queries": ["x"], "return_scores": "yes"}, ["body", "return_scores"], "boolean"),
    ],
)
def test_bad_request_is_a_422_naming_the_field(client, body, loc, msg):
    resp = client.post("/retrieve", json=body)
    assert resp.status_code == 422
    (err,) = resp.json()["detail"]
    assert err["loc"] == loc and msg in err["msg"]


class FailsOn:
    """A backend that raises on any batch holding the word 'poison'."""

    name = "fake"

    def __init__(self, docs):
        self.docs = docs

    def search(self, queries, k=3):
        if any("poison" in q for q in queries):
            raise RuntimeError("cannot search poison")
        return [self.docs[:1] for _ in queries]


def test_one_failing_query_does_not_fail_the_others(small_docs, caplog):
    client = TestClient(create_app(FailsOn(small_docs)))
    with caplog.at_level(logging.WARNING, logger="tools.server"):
        body = client.post("/retrieve", json={"queries": ["fine", "poison", "also fine"]}).json()
    assert [len(r) for r in body["result"]] == [1, 0, 1]
    assert body["errors"] == [{"index": 1, "error": "RuntimeError: cannot search poison"}]
    assert "query 1 failed" in caplog.text
    # when nothing succeeds it is a server fault (5xx), which clients retry
    assert client.post("/retrieve", json={"queries": ["poison"]}).status_code == 503


def test_concurrent_searches_match_sequential_ones(small_docs):
    bm25 = BM25Backend(small_docs)
    queries = ["iron tower Paris", "German composer operas", "purring cats hunt mice", "highest mountain"] * 8
    expected = [bm25.search([q])[0] for q in queries]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda q: bm25.search([q])[0], queries))
    assert got == expected


def test_binds_loopback_by_default_and_refuses_an_empty_host():
    sock = bind_socket(port=0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()
    with pytest.raises(HostError, match="--host is empty"):
        bind_socket("", 0)
