"""HttpBackend: a Search-R1 URL with or without /retrieve, bounded time on a stuck server, errors that
name the endpoint."""

import socket

import httpx
import pytest
from pydantic import ValidationError

from tools.backends import SearchUnavailableError, make_backend
from tools.config import SearchConfig
from tools.errors import ServiceError, UserError
from tools.http import HttpBackend, SearchUrlError


@pytest.mark.parametrize(
    "url",
    [
        "http://search.test",
        "http://search.test/",
        "http://search.test/retrieve",
        "http://search.test/retrieve/",
        " http://search.test//retrieve// ",
    ],
)
def test_url_with_or_without_retrieve_posts_to_one_retrieve(url):
    seen = []

    def handler(request):
        seen.append(str(request.url))
        return httpx.Response(
            200, json={"result": [[{"document": {"id": 1, "contents": '"T"\nx'}, "score": 1}]]}
        )

    backend = HttpBackend(url, retries=0)
    backend.client = httpx.Client(transport=httpx.MockTransport(handler))
    assert backend.search(["q"])[0][0].title == "T"
    assert seen == ["http://search.test/retrieve"]


def test_url_prefix_is_kept():
    assert HttpBackend("https://h.test/api/v2/retrieve").endpoint == "https://h.test/api/v2/retrieve"


def test_url_without_scheme_is_a_user_error():
    with pytest.raises(SearchUrlError, match=r"'127\.0\.0\.1:8000' is not an http") as info:
        HttpBackend("127.0.0.1:8000")
    assert isinstance(info.value, UserError)
    with pytest.raises(ValidationError, match="url"):
        SearchConfig(backend="http", url="127.0.0.1:8000")


def test_config_timeouts_reach_the_client():
    cfg = SearchConfig(backend="http", timeout_s=4, connect_timeout_s=1.5, retries=0, backoff_s=0)
    backend = make_backend(cfg)
    assert backend.client.timeout == httpx.Timeout(4, connect=1.5) and backend.retries == 0


def test_default_budget_fails_a_stuck_server_within_a_minute():
    cfg = SearchConfig()
    worst = (cfg.retries + 1) * cfg.timeout_s + sum(cfg.backoff_s * 2**i for i in range(cfg.retries))
    assert worst < 60


def test_stuck_server_error_names_endpoint_attempts_and_time():
    with socket.socket() as stuck:  # accepts connections (the kernel's backlog) and never answers
        stuck.bind(("127.0.0.1", 0))
        stuck.listen(8)
        url = f"http://127.0.0.1:{stuck.getsockname()[1]}/retrieve"
        backend = HttpBackend(url, timeout_s=0.2, retries=1, backoff_s=0)
        with pytest.raises(SearchUnavailableError) as info:
            backend.search(["q"])
    msg = str(info.value)
    assert f"{url} unavailable: 2 attempts in " in msg and "ReadTimeout after 0.2 s" in msg
    assert "search.timeout_s" in msg and isinstance(info.value, ServiceError)


def test_partial_failure_from_the_server_is_an_error_not_an_empty_result():
    answer = {"result": [[], []], "errors": [{"index": 1, "error": "RuntimeError: boom"}]}
    backend = HttpBackend("http://search.test", retries=0)
    backend.client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json=answer)))
    with pytest.raises(SearchUnavailableError, match="failed on some queries.*boom"):
        backend.search(["a", "b"])


def test_non_json_answer_names_the_endpoint():
    backend = HttpBackend("http://search.test/", retries=0)
    backend.client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, text="<html>")))
    with pytest.raises(SearchUnavailableError, match=r"malformed answer from http://search\.test/retrieve"):
        backend.search(["a"])
