"""Client for a Search-R1/SSP-style retrieval server (ours in ``tools.server``, or an existing one).

``POST {url}/retrieve {"queries": [...], "topk": k, "return_scores": true}`` ->
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` with ``contents = "Title"\\ntext``.
Connection errors, timeouts and 5xx answers are retried with exponential backoff; after the last retry
(or on a 4xx / malformed answer, which retrying cannot fix) :class:`SearchUnavailableError` is raised.
"""

from __future__ import annotations

import time

import httpx

from tools.backends import SearchUnavailableError, search_nonempty
from tools.corpus import Doc, split_contents


class HttpBackend:
    name = "http"

    def __init__(self, url: str, timeout_s: float = 30.0, retries: int = 3, backoff_s: float = 0.5) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self.client = httpx.Client(timeout=timeout_s)

    def search(self, queries: list[str], k: int = 3) -> list[list[Doc]]:
        return search_nonempty(queries, lambda qs: self._search(qs, k))

    def _search(self, queries: list[str], k: int) -> list[list[Doc]]:
        result = self._post({"queries": queries, "topk": k, "return_scores": True})
        try:
            if len(result) != len(queries):
                raise ValueError(f"{len(result)} result lists for {len(queries)} queries")
            return [[_to_doc(hit) for hit in hits] for hits in result]
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise SearchUnavailableError(f"malformed answer from {self.url}/retrieve: {e}") from e

    def _post(self, payload: dict) -> list:
        endpoint = f"{self.url}/retrieve"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                resp = self.client.post(endpoint, json=payload)
            except httpx.TransportError as e:  # connection refused, timeout, reset, ...
                last = f"{type(e).__name__}: {e}"
                continue
            if resp.status_code >= 500:
                last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                continue
            if resp.status_code >= 400:
                raise SearchUnavailableError(
                    f"retrieval server {endpoint} rejected the request: HTTP {resp.status_code}: "
                    f"{resp.text[:200]}"
                )
            try:
                return resp.json()["result"]
            except (ValueError, KeyError, TypeError) as e:
                raise SearchUnavailableError(f"malformed answer from {endpoint}: {e}") from e
        raise SearchUnavailableError(
            f"retrieval server {endpoint} unavailable after {self.retries + 1} attempts ({last}); "
            "is it running? start one with `sesa search serve`"
        )

    def close(self) -> None:
        self.client.close()


def _to_doc(hit: dict) -> Doc:
    # Servers answering with return_scores=false send bare documents; accept both shapes.
    doc = hit.get("document", hit)
    title, text = split_contents(doc["contents"])
    return Doc(id=str(doc.get("id", "")), title=title, text=text, score=float(hit.get("score", 0.0)))
