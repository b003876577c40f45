"""Client for a Search-R1/SSP-style retrieval server (ours in ``tools.server``, or an existing one).

``POST {url}/retrieve {"queries": [...], "topk": k, "return_scores": true}`` ->
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` with ``contents = "Title"\\ntext``.
``url`` may be the server's base URL or already end in ``/retrieve`` (Search-R1 configs give the latter).
Connection errors, timeouts and 5xx answers are retried with exponential backoff; after the last retry
(or on a 4xx / malformed answer, which retrying cannot fix) :class:`SearchUnavailableError` is raised,
naming the endpoint, the attempts and the time spent. An answer is untrusted bytes: read up to a cap that
grows with the documents asked for, and refused (naming the field) unless it holds one list per query of at
most ``topk`` hits, each with string ``contents`` under :data:`MAX_DOC_CHARS`, a string or integer id and a
finite score.
"""

from __future__ import annotations

import time

import httpx

from tools.backends import SearchUnavailableError, search_nonempty
from tools.corpus import Doc, split_contents
from tools.errors import UserError
from tools.replies import ReplyError, check_status, field, finite, parse_json, read_capped, snippet

MAX_DOC_CHARS = 1_000_000
"""The longest document text accepted from a retrieval server (a passage is about 600 characters; a whole
article rarely passes 200 000): past it, the answer is refused rather than fed to a model's context."""
BASE_BYTES = 256 * 1024
"""Body cap of an answer before its documents: the JSON around them, an error page."""


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
        cap = BASE_BYTES + 4 * MAX_DOC_CHARS * len(queries) * k  # UTF-8 takes up to 4 bytes a character
        answer = self._post({"queries": queries, "topk": k, "return_scores": True}, cap)
        try:
            if errors := answer.get("errors"):
                # The server answered the other queries, but an empty list here would read as "no
                # documents found" to the model: a failed search must look like one.
                raise SearchUnavailableError(
                    f"retrieval server {self.endpoint} failed on some queries: {snippet(str(errors), 300)}"
                )
            return _results(answer, len(queries), k)
        except ReplyError as e:
            raise SearchUnavailableError(
                f"malformed answer from {self.endpoint}: {e}; is it a Search-R1 /retrieve server?"
            ) from None

    def _post(self, payload: dict, max_bytes: int) -> dict:
        start = time.monotonic()
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                with self.client.stream("POST", self.endpoint, json=payload) as resp:
                    body = read_capped(resp.iter_bytes(), max_bytes)
            except httpx.TimeoutException as e:
                last = f"{type(e).__name__} after {self.timeout_s:g} s"
                continue
            except httpx.TransportError as e:  # connection refused, reset, ...
                last = f"{type(e).__name__}: {e}"
                continue
            except ReplyError as e:
                raise SearchUnavailableError(f"malformed answer from {self.endpoint}: {e}") from None
            if resp.status_code >= 500 or resp.status_code == 429:
                last = f"HTTP {resp.status_code}: {snippet(body, 200)}"
                continue
            try:
                check_status(resp.status_code, body)
            except ReplyError as e:
                raise SearchUnavailableError(
                    f"retrieval server {self.endpoint} rejected the request: {e}"
                ) from None
            try:
                answer = parse_json(body)
                field(answer, "result", list, "answer")
                return answer
            except ReplyError as e:
                raise SearchUnavailableError(
                    f"malformed answer from {self.endpoint}: {e}; is it a Search-R1 /retrieve server?"
                ) from None
        elapsed = time.monotonic() - start
        raise SearchUnavailableError(
            f"retrieval server {self.endpoint} unavailable: {self.retries + 1} attempts in {elapsed:.1f} s, "
            f"last: {last}. Is it running (`sesa search serve`)? If it is only slow, raise search.timeout_s "
            "or search.retries"
        )

    def close(self) -> None:
        self.client.close()


def _results(answer: dict, n_queries: int, k: int) -> list[list[Doc]]:
    result = answer["result"]
    if len(result) != n_queries:
        raise ReplyError(f"result has {len(result)} lists for {n_queries} queries")
    out = []
    for i, hits in enumerate(result):
        if not isinstance(hits, list):
            raise ReplyError(f"result[{i}] is {type(hits).__name__}, not a list of hits")
        if len(hits) > k:
            raise ReplyError(f"result[{i}] has {len(hits)} hits, more than the topk={k} asked for")
        out.append([_to_doc(hit, f"result[{i}][{j}]") for j, hit in enumerate(hits)])
    return out


def _to_doc(hit: object, where: str) -> Doc:
    if not isinstance(hit, dict):
        raise ReplyError(f"{where} is {type(hit).__name__}, not an object")
    # Servers answering with return_scores=false send bare documents; accept both shapes.
    doc = field(hit, "document", dict, where) if "document" in hit else hit
    at = f"{where}.document" if doc is not hit else where
    contents = field(doc, "contents", str, at)
    if len(contents) > MAX_DOC_CHARS:
        raise ReplyError(f"{at}.contents has {len(contents)} characters, more than {MAX_DOC_CHARS}")
    doc_id = field(doc, "id", (str, int), at, optional=True)
    score = hit.get("score")
    title, text = split_contents(contents)
    return Doc(
        id="" if doc_id is None else str(doc_id),
        title=title,
        text=text,
        score=0.0 if score is None else finite(score, f"{where}.score"),
    )
