"""Free ports picked for a config that needs several: all distinct, all bindable."""

import socket

from tools.ports import free_port, free_ports


def test_ports_picked_together_are_distinct_and_bindable():
    together = free_ports(300)
    assert len(set(together)) == 300
    # the failure free_ports prevents: 300 one-by-one picks repeat a port (about 3 repeats expected from
    # a kernel range of about 14,000 ports bind() draws from)
    one_by_one = [free_port() for _ in range(300)]
    print(f"one-by-one: {300 - len(set(one_by_one))} repeated ports of 300")
    for port in together[:20]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
