"""Process helpers shared by what the run starts (policy servers, trainer jobs)."""

from __future__ import annotations

import ctypes
import signal


def die_with_parent() -> None:
    """In a child, before exec: get SIGTERM when the process that started it dies (even by SIGKILL), so a
    killed parent never leaves a server or a trainer job holding memory, GPUs and ports."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass
