import socket

import pytest
from fastapi.testclient import TestClient

from tests.foreign_address import foreign_address
from tools.bm25 import BM25Backend
from tools.server import HostError, PortInUseError, bind_socket, create_app, serve


def test_port_in_use_is_a_clear_error(small_docs):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUseError, match=rf"port {port} .*already in use"):
            bind_socket("127.0.0.1", port)
        with pytest.raises(PortInUseError, match=str(port)):
            serve(BM25Backend(small_docs), port=port)  # raises before uvicorn starts


def test_retrieve_api_shape(small_docs):
    client = TestClient(create_app(BM25Backend(small_docs), default_k=1))
    body = client.post("/retrieve", json={"queries": ["cat mice", ""], "return_scores": True}).json()
    assert len(body["result"]) == 2 and body["result"][1] == []
    (hit,) = body["result"][0]  # default_k=1
    assert hit["document"] == {"id": "1", "contents": f'"Cat"\n{small_docs[1].text}'} and hit["score"] > 0
    assert client.post("/retrieve", json={"queries": ["x"], "topk": 0}).status_code == 422


def test_a_port_out_of_range_is_a_clear_error_not_an_overflow():
    with pytest.raises(HostError, match="--port 70000 is not a TCP port"):
        bind_socket("127.0.0.1", 70000)


def test_an_address_that_is_not_this_machines_is_named_as_such():
    foreign = foreign_address()
    with pytest.raises(HostError, match=f"{foreign} is not an address of this machine") as err:
        bind_socket(foreign, 8000)
    assert "in use" not in str(err.value)


@pytest.mark.parametrize(
    ("raw", "status", "says"),
    [
        (b'{"queries": ["cat"], "topk": NaN}', 400, "topk: NaN"),
        (b'{"queries": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", 400, "deeper than"),
        (b'{"queries": ["' + b"x" * (9 * 2**20) + b'"]}', 413, "larger than"),
    ],
)
def test_a_malformed_body_is_a_4xx_in_the_routes_error_shape(small_docs, raw, status, says):
    client = TestClient(create_app(BM25Backend(small_docs)))
    r = client.post("/retrieve", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == status and says in r.json()["detail"][0]["msg"]
