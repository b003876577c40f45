"""Client for a Search-R1/SSP-style retrieval server (ours in ``tools.server``, or an existing one).

``POST {url}/retrieve {"queries": [...], "topk": k, "return_scores": true}`` ->
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` with ``contents = "Title"\\ntext``.
``url`` may be the server's base URL or already end in ``/retrieve`` (Search-R1 configs give the latter).
Connection errors, timeouts and 5xx answers are retried with exponential backoff; after the last retry
(or on a 4xx / malformed answer, which retrying cannot fix) :class:`SearchUnavailableError` is raised,
naming the endpoint, the attempts and the time spent.
"""

from __future__ import annotations

import time

import httpx

from tools.backends import SearchUnavailableError, search_nonempty
from tools.corpus import Doc, split_contents
from tools.errors import UserError


class SearchUrlError(UserError, ValueError):
    """The retrieval server URL is not an http(s) URL."""


def base_url(url: str) -> str:
    """``url`` without trailing slashes or a trailing ``/retrieve``: the client appends ``/retrieve``."""
    base = url.strip().rstrip("/")
    base = base.removesuffix("/retrieve").rstrip("/")
    if not base.lower().startswith(("http://", "https://")):
        raise SearchUrlError(
            f"search url {url!r} is not an http:// or https:// URL; set search.url (--url) to the retrieval "
            "server, e.g. http://127.0.0.1:8000"
        )
    return base


class HttpBackend:
    name = "http"

    def __init__(
        self,
        url: str,
        timeout_s: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        connect_timeout_s: float = 3.0,
    ) -> None:
        self.url = base_url(url)
        self.endpoint = f"{self.url}/retrieve"
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s))

    def search(self, queries: list[str], k: int = 3) -> list[list[Doc]]:
        return search_nonempty(queries, lambda qs: self._search(qs, k))

    def _search(self, queries: list[str], k: int) -> list[list[Doc]]:
        answer = self._post({"queries": queries, "topk": k, "return_scores": True})
        if errors := answer.get("errors"):
            # The server answered the other queries, but an empty list here would read as "no
            # documents found" to the model: a failed search must look like one.
            raise SearchUnavailableError(f"retrieval server {self.endpoint} failed on some queries: {errors}")
        result = answer.get("result")
        try:
            if len(result) != len(queries):
                raise ValueError(f"{len(result)} result lists for {len(queries)} queries")
            return [[_to_doc(hit) for hit in hits] for hits in result]
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise SearchUnavailableError(f"malformed answer from {self.endpoint}: {e}") from e

    def _post(self, payload: dict) -> dict:
        start = time.monotonic()
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                resp = self.client.post(self.endpoint, json=payload)
            except httpx.TimeoutException as e:
                last = f"{type(e).__name__} after {self.timeout_s:g} s"
                continue
            except httpx.TransportError as e:  # connection refused, reset, ...
                last = f"{type(e).__name__}: {e}"
                continue
            if resp.status_code >= 500:
                last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                continue
            if resp.status_code >= 400:
                raise SearchUnavailableError(
                    f"retrieval server {self.endpoint} rejected the request: HTTP {resp.status_code}: "
                    f"{resp.text[:300]}"
                )
            try:
                answer = resp.json()
                if not isinstance(answer, dict) or "result" not in answer:
                    raise ValueError("no 'result' key")
                return answer
            except ValueError as e:
                raise SearchUnavailableError(
                    f"malformed answer from {self.endpoint}: {e}; is it a Search-R1 /retrieve server?"
                ) from e
        elapsed = time.monotonic() - start
        raise SearchUnavailableError(
            f"retrieval server {self.endpoint} unavailable: {self.retries + 1} attempts in {elapsed:.1f} s, "
            f"last: {last}. Is it running (`sesa search serve`)? If it is only slow, raise search.timeout_s "
            "or search.retries"
        )

    def close(self) -> None:
        self.client.close()


def _to_doc(hit: dict) -> Doc:
    # Servers answering with return_scores=false send bare documents; accept both shapes.
    doc = hit.get("document", hit)
    title, text = split_contents(doc["contents"])
    return Doc(id=str(doc.get("id", "")), title=title, text=text, score=float(hit.get("score", 0.0)))
