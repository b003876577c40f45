"""An IPv4 address that is not this machine's, for tests of what a server says when told to listen there."""

from __future__ import annotations

import socket

import pytest

FOREIGN = "203.0.113.7"  # TEST-NET-3, documentation only (this machine's eth0 is in TEST-NET-1)


def foreign_address() -> str:
    """FOREIGN, or a skip where it is an interface of this machine (checked with a bare socket, not the code
    under test)."""
    with socket.socket() as s:
        try:
            s.bind((FOREIGN, 0))
        except OSError:
            return FOREIGN
    pytest.skip(f"{FOREIGN} is an address of this machine")
