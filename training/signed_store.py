"""The coordinator store's values signed with a shared secret, so a network peer cannot forge them.

torch's ``TCPStore`` has no authentication: anyone who reaches its port can read and write every key, and the
keys of the coordinator's protocol carry the run config (with its trainer launcher), each step's training data,
where the weights are, and ``stop``. With ``SESA_COORDINATOR_TOKEN`` set (the same secret on the orchestrator's
node and on every trainer node; required when the coordinator is not on loopback), every value is written as
``sesa1:<HMAC-SHA256 of key and value>:<value>`` and every read checks it: a value some other client wrote is
refused with an error naming its key, before anything acts on it. The heartbeat counters (``add``) stay
unsigned: a forged beat can only keep a dead peer looking alive until the store closes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

from tools.errors import ServiceError

TOKEN_ENV = "SESA_COORDINATOR_TOKEN"
PREFIX = b"sesa1:"


class ForgedValueError(ServiceError, RuntimeError):
    """A store value whose signature does not match this node's token."""


def coordinator_token() -> bytes | None:
    """The shared secret from the environment (None when unset or empty)."""
    token = os.environ.get(TOKEN_ENV, "")
    return token.encode() if token else None


class SignedStore:
    """A TCPStore whose ``set`` signs and whose ``get`` checks; everything else passes through."""

    def __init__(self, store: Any, token: bytes) -> None:
        self._store, self._token = store, token

    def _mac(self, key: str, value: bytes) -> bytes:
        msg = key.encode() + b"\0" + value
        return hmac.new(self._token, msg, hashlib.sha256).hexdigest().encode()

    def set(self, key: str, value: str | bytes) -> None:
        data = value.encode() if isinstance(value, str) else bytes(value)
        self._store.set(key, PREFIX + self._mac(key, data) + b":" + data)

    def get(self, key: str) -> bytes:
        raw = bytes(self._store.get(key))
        head, mac, data = raw[: len(PREFIX)], raw[len(PREFIX) : len(PREFIX) + 64], raw[len(PREFIX) + 65 :]
        if head != PREFIX or not hmac.compare_digest(mac, self._mac(key, data)):
            raise ForgedValueError(
                f"the coordinator's key {key!r} holds a value not signed with this node's {TOKEN_ENV}: another "
                "client of the store wrote it (or this node's token differs from the orchestrator's). Nothing "
                f"was done with it; give every node the same {TOKEN_ENV}, and keep the coordinator's port "
                "on a private interface"
            )
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
