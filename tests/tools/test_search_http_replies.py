"""HttpBackend takes nothing from a retrieval server on trust: one list per query, at most topk hits each,
string contents under MAX_DOC_CHARS, a string or integer id, a finite score, a body under its cap. A bad
answer is a SearchUnavailableError naming the endpoint and the field, asked once; 5xx and 429 are retried."""

from __future__ import annotations

import json

import httpx
import pytest

from tools.backends import SearchUnavailableError
from tools.http import MAX_DOC_CHARS, HttpBackend

URL = "http://search.test"
HIT = {"document": {"id": "d1", "contents": '"Paris"\nParis is in France.'}, "score": 2.5}


def _backend(answer, seen=None, retries=1):
    """A backend whose server answers ``answer(request_json) -> httpx.Response``."""

    def handler(request):
        if seen is not None:
            seen.append(json.loads(request.content))
        return answer(json.loads(request.content))

    backend = HttpBackend(URL, retries=retries, backoff_s=0.0)
    backend.client = httpx.Client(transport=httpx.MockTransport(handler))
    return backend


def _json(obj, status=200):
    """A reply of ``obj`` as JSON, non-finite floats written as Python does (``Infinity``)."""
    return lambda req: httpx.Response(status, content=json.dumps(obj).encode())


def test_good_answers_with_and_without_scores():
    docs = _backend(_json({"result": [[HIT], []]})).search(["a", "b"], k=3)
    assert [len(d) for d in docs] == [1, 0] and docs[0][0].title == "Paris" and docs[0][0].score == 2.5
    bare = _backend(_json({"result": [[{"id": 7, "contents": "T\nx"}]]})).search(["a"], k=1)
    assert bare[0][0].id == "7" and bare[0][0].score == 0.0


@pytest.mark.parametrize(
    ("answer", "field"),
    [
        ({"result": {"a": [HIT]}}, "answer.result is an object, not a list"),
        ({"results": [[HIT]]}, "answer.result is missing"),
        ({"result": [[HIT], [HIT]]}, "result has 2 lists for 1 queries"),
        ({"result": []}, "result has 0 lists for 1 queries"),
        ({"result": ["Paris"]}, "result[0] is str, not a list of hits"),
        ({"result": [["Paris"]]}, "result[0][0] is str, not an object"),
        ({"result": [[HIT] * 4]}, "result[0] has 4 hits, more than the topk=3"),
        (
            {"result": [[{"document": {"id": "d", "contents": 5}}]]},
            "result[0][0].document.contents is the number 5",
        ),
        ({"result": [[{"document": {"id": "d"}}]]}, "result[0][0].document.contents is missing"),
        ({"result": [[{"document": "Paris"}]]}, "result[0][0].document is the string 'Paris'"),
        ({"result": [[{"document": {"id": [1], "contents": "t"}}]]}, "result[0][0].document.id is a list"),
        ({"result": [[{**HIT, "score": "high"}]]}, "result[0][0].score is the string 'high'"),
        ({"result": [[{**HIT, "score": True}]]}, "result[0][0].score is the boolean true"),
        ({"result": [[{**HIT, "score": float("inf")}]]}, "result[0][0].score is inf, not a finite number"),
        ([[HIT]], "answer is a list, not an object"),
    ],
)
def test_a_malformed_answer_names_the_field_and_is_asked_once(answer, field):
    seen = []
    with pytest.raises(SearchUnavailableError) as err:
        _backend(_json(answer), seen).search(["q"], k=3)
    assert f"{URL}/retrieve" in str(err.value) and field in str(err.value)
    assert len(seen) == 1


def test_a_document_past_the_limit_is_refused():
    big = {"document": {"id": "d", "contents": "T\n" + "x" * MAX_DOC_CHARS}}
    with pytest.raises(
        SearchUnavailableError, match=r"result\[0\]\[0\].document.contents has 1000002 characters"
    ):
        _backend(_json({"result": [[big]]})).search(["q"], k=1)


def test_a_body_past_the_cap_is_refused_unread():
    body = b'{"result": [[' + b" " * (20 * MAX_DOC_CHARS) + b"]]}"
    with pytest.raises(SearchUnavailableError, match="a body over .* bytes"):
        _backend(lambda req: httpx.Response(200, content=body)).search(["q"], k=1)


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(200, text="<html>portal login</html>"), "an HTML page"),
        (httpx.Response(200, text=""), "an empty body"),
        (httpx.Response(400, json={"detail": "topk must be positive"}), "HTTP 400: topk must be positive"),
        (httpx.Response(200, json={"result": [[]], "errors": ["\x1b[2Jdown"]}), "failed on some queries"),
    ],
)
def test_refusals_are_one_request_with_the_servers_words(response, message):
    seen = []
    with pytest.raises(SearchUnavailableError, match=message) as err:
        _backend(lambda req: response, seen).search(["q"], k=1)
    assert len(seen) == 1 and "\x1b" not in str(err.value)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_busy_servers_are_retried(status):
    seen = []
    with pytest.raises(SearchUnavailableError, match=f"2 attempts .* HTTP {status}"):
        _backend(_json({"detail": "busy"}, status), seen, retries=1).search(["q"], k=1)
    assert len(seen) == 2
