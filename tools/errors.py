"""The two kinds of failure every `sesa` command reports without a traceback.

They live in the lowest layer so that any module can raise them; ``sesa_cli.main`` is the one place that
turns them into a message and an exit code (a traceback only with ``-v``).
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user gave is unusable: a file, a key, a flag, a request. The message names it (file and
    line, key, or flag) and says how to fix it. The CLI prints it on one line and exits with code 2."""

    exit_code = 2


class ServiceError(RuntimeError):
    """A service the run depends on (search server, policy or judge endpoint, a trainer process) stayed
    down or too slow after its retries. The message names the URL or process. The CLI exits with code 1."""

    exit_code = 1
