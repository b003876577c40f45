"""Why a child process ended, said so a user can act on it: a bare "exited with code -9" does not say that
the kernel's out-of-memory killer is the usual sender of SIGKILL to a process nobody else stopped."""

from __future__ import annotations

import re
import signal

# torchrun/accelerate report a rank killed by a signal in their own log rather than in their exit code
_LAUNCHER_SIGKILL = re.compile(r"Signal 9 \(SIGKILL\)|Signals\.SIGKILL|exitcode\s*:\s*-9")
# vLLM's API server outlives a SIGKILLed engine core or worker: it logs the death, then exits 0. An engine that
# failed on its own logs its error first, so "exited unexpectedly" with no engine error is a kill from outside.
_VLLM_CHILD_GONE = re.compile(r"died unexpectedly \(exit code: -9\)|engine core exited unexpectedly")
_VLLM_ENGINE_ERROR = re.compile(
    r"\(EngineCore[^)]*\) ERROR|EngineCore (failed to start|encountered a fatal error)"
)


def killed_by_sigkill(returncode: int | None, log_tail: str = "") -> bool:
    """The process (or, under a launcher, one of its ranks; under a vLLM server, its engine) died of SIGKILL.

    >>> killed_by_sigkill(-9), killed_by_sigkill(1, "Signal 9 (SIGKILL) received by PID 7"), killed_by_sigkill(1)
    (True, True, False)
    """
    return (
        returncode == -signal.SIGKILL
        or bool(_LAUNCHER_SIGKILL.search(log_tail))
        or bool(_VLLM_CHILD_GONE.search(log_tail) and not _VLLM_ENGINE_ERROR.search(log_tail))
    )


def oom_hint(returncode: int | None, log_tail: str, lower: str) -> str:
    """A sentence to add to an exit message when SIGKILL ended the process ('' otherwise); ``lower`` names the
    settings that shrink the process's memory.

    >>> oom_hint(-9, "", "train.micro_batch_size").startswith(" (probably killed by the kernel's out-of-memory")
    True
    """
    if not killed_by_sigkill(returncode, log_tail):
        return ""
    return (
        f" (probably killed by the kernel's out-of-memory killer (check `dmesg`/free memory); lower {lower}, or "
        "free memory on the machine)"
    )
