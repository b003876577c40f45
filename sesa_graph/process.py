"""Process helpers shared by what the run starts (policy servers, trainer jobs)."""

from __future__ import annotations

import ctypes
import os
import signal


def die_with_parent() -> None:
    """In a child, before exec: get SIGTERM when the process that started it dies (even by SIGKILL), so a
    killed parent never leaves a server or a trainer job holding memory, GPUs and ports."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def yield_cpu(increment: int) -> None:
    """In a child, before exec: lower its CPU priority by ``increment`` (nice). A child started in a session of
    its own is also its own scheduling autogroup where the kernel has them (CONFIG_SCHED_AUTOGROUP, on in most
    desktop distributions), and there a process's nice weighs only against its own group: the group's nice
    (/proc/self/autogroup) is what yields to the rest of the run, so both are set."""
    if increment <= 0:
        return
    os.nice(increment)
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(increment))
    except OSError:  # no autogroups here: the process's nice is what counts
        pass
