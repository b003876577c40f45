"""tools.request_body: the bounded JSON body every project server reads, refused by name before a route runs."""

from __future__ import annotations

import json

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from tools.request_body import BadRequest, JsonBodyGuard, json_object

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("raw", "says", "param"),
    [
        (b'{"a": {"t": NaN}}', "a.t: NaN", "a.t"),
        (b'{"xs": [1, -Infinity]}', "xs[1]: -Infinity", "xs[1]"),
        (b"[1]", "must be a JSON object, not a list", None),
        (b"null", "not a NoneType", None),
        (b"\xff", "not valid JSON", None),
        (b'{"a": ' + b"[" * 50 + b"]" * 50 + b"}", "nested deeper than 32", "a" + "[0]" * 31),
        (b"[" * 200_000 + b"]" * 200_000, "nests deeper than 32", None),
        (b'{"n": ' + b"1" * 5000 + b"}", "not valid JSON", None),
    ],
)
def test_bad_bodies_are_refused_naming_where(raw, says, param):
    with pytest.raises(BadRequest) as info:
        json_object(raw)
    assert says in info.value.message and info.value.param == param and info.value.status == 400


def test_a_body_within_bounds_is_parsed_as_is():
    data = {"a": [1, 2.5, "x", None, {"b": True}], "c": "NaN"}  # the string "NaN" is only a string
    assert json_object(json.dumps(data).encode()) == data


def _app(check=None, max_bytes=1000):
    seen = []

    async def route(request):
        seen.append(await request.body())
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/in", route, methods=["POST"]), Route("/out", route, methods=["POST"])])
    return TestClient(JsonBodyGuard(app, paths={"/in"}, check=check, max_bytes=max_bytes)), seen


def test_the_guard_replays_the_exact_bytes_to_the_route_and_leaves_other_paths_alone():
    client, seen = _app()
    raw = b'{"a":  1 }'
    assert client.post("/in", content=raw, headers=JSON).status_code == 200
    assert client.post("/in", content=raw).status_code == 200  # no content type: taken as JSON
    assert client.post("/out", content=b"not json", headers={"content-type": "text/plain"}).status_code == 200
    assert seen == [raw, raw, b"not json"]


@pytest.mark.parametrize(
    ("raw", "headers", "status", "says"),
    [
        (b'{"a": "' + b"x" * 2000 + b'"}', JSON, 413, "larger than 1000 bytes"),
        (b'{"a": 1}', {"content-type": "text/plain"}, 415, "content-type 'text/plain'"),
        (b'{"a": NaN}', JSON, 400, "a: NaN"),
        (b'{"a": 2}', {"content-type": "application/json; charset=utf-8"}, 400, "a must be 1"),
    ],
)
def test_the_guard_answers_a_refusal_itself_and_the_route_never_runs(raw, headers, status, says):
    def check(path, data):
        if data.get("a") != 1:
            raise BadRequest(f"a must be 1 on {path}", "a")

    client, seen = _app(check)
    r = client.post("/in", content=raw, headers=headers)
    assert r.status_code == status and says in r.json()["error"]["message"]
    assert r.json()["error"]["code"] == status and seen == []


def test_an_oversized_body_sent_in_chunks_is_refused_without_keeping_it():
    client, seen = _app(max_bytes=100)

    def chunks():
        for _ in range(50):
            yield b"x" * 64

    r = client.post("/in", content=chunks(), headers=JSON)
    assert r.status_code == 413 and seen == []
