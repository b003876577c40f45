"""Runs inside a vLLM API server (``--middleware``): the completion and chat requests it gets are checked
against the project's own strict schema before vLLM sees them.

vLLM's request models accept and ignore unknown fields (a misspelt option is silently not applied) and
take values the project treats as bugs (``seed: -1``, ``max_tokens: "8"``, ``logprobs: -1``, the whole
vocabulary per token). This front refuses them with a 400 (413 for an oversized body, 415 for a body that is
not JSON) whose body is OpenAI's error shape with ``param`` naming the field: the same checks, and the same
messages, as ``sesa policy serve --engine local`` (:mod:`sesa_graph.policy.serve_requests`). What only vLLM
knows (the vocabulary, the context length, the served model name) it still checks itself.

Loaded by vLLM by import path with the app as its only argument, so its settings are the defaults here.
"""

from __future__ import annotations

from typing import Any

from sesa_graph.policy.serve_requests import KINDS, check_body
from tools.request_body import JsonBodyGuard


class RequestValidator(JsonBodyGuard):
    """:class:`tools.request_body.JsonBodyGuard` on ``/v1/completions`` and ``/v1/chat/completions``."""

    def __init__(self, app: Any) -> None:
        super().__init__(app, paths=KINDS, check=check_body)
