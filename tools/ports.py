"""Whether a server could listen on an address here, said for the user: a taken port and an address that is not
this machine's need different fixes, and socket.bind's errno alone does not say which."""

from __future__ import annotations

import errno
import ipaddress
import socket


def family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only.

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0"), is_loopback("10.0.0.2")
    (True, True, False, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it resolves to whatever the network says


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports free on ``host`` now. Each socket stays bound until all are picked: ports picked
    one at a time can repeat (the kernel may hand a just-closed port out again), which made a run config with
    two equal rendezvous ports a rare, unexplained failure."""
    socks = [socket.socket(family(host)) for _ in range(n)]
    try:
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def bind_problem(host: str, port: int) -> str | None:
    """Why a server could not listen on ``host:port`` here; None when it could."""
    with socket.socket(family(host)) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            return bind_error_message(host, port, exc)
    return None


def bind_error_message(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is in use; pick another with --port (or port: in the config), "
            "or stop what listens there"
        )
    # EADDRNOTAVAIL and kin: a typo'd or another machine's address, which no port change fixes
    return (
        f"cannot listen on {host}:{port} ({exc.strerror}): {host} is not an address of this machine; give "
        "127.0.0.1, or one of this machine's interfaces where the service allows it"
    )
