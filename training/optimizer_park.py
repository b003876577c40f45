"""A CPU trainer's optimizer state kept on disk while the trainer waits (``train.park_optimizer``).

Between two updates a trainer only waits: for the step's rollouts, then for the other trainer's turn. AdamW's
two moments are 8 bytes a parameter of that wait's memory (1.0 GiB of the SmolLM2-135M trainer's 2.2 GiB at
rest), and nothing reads them until the next optimizer step. So the trainer writes them to a file once its
weights are published, frees them, and reads them back in a pre-hook of the optimizer's step: the update's
forward and backward passes, its peak, run without them too. A killed trainer loses nothing: it resumes from its
last checkpoint, which transformers wrote with the moments before they were parked.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("sesa.trainer")


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer under accelerate's wrapper."""
    return getattr(optimizer, "optimizer", optimizer)


def _params(opt: Any) -> list[Any]:
    return [p for group in opt.param_groups for p in group["params"]]


class ParkedOptimizer:
    """Parks ``optimizer``'s per-parameter state in ``path`` and brings it back, in the same parameter order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.parked = False
        self._hooked: Any = None  # the optimizer whose step restores the state

    def park(self, optimizer: Any) -> int:
        """Write the state to the file and free it; the bytes parked (0 before the first update: AdamW makes
        its state at its first step)."""
        import torch

        opt = _torch_optimizer(optimizer)
        if self._hooked is not opt:  # the moments come back when the next step needs them
            opt.register_step_pre_hook(lambda o, args, kwargs: self.restore(o))
            self._hooked = opt
        params = _params(opt)
        state = {i: opt.state[p] for i, p in enumerate(params) if opt.state.get(p)}
        if not state:
            return 0
        size = sum(t.nbytes for s in state.values() for t in s.values() if torch.is_tensor(t))
        t0 = time.monotonic()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, self.path)
        for p in params:
            opt.state.pop(p, None)
        self.parked = True
        log.info(
            "optimizer state parked: %.2f GiB in %.1fs (%s)", size / 2**30, time.monotonic() - t0, self.path
        )
        return size

    def restore(self, optimizer: Any) -> None:
        """Read the parked state back into ``optimizer`` and remove the file (nothing when none is parked).
        Called by the optimizer's step itself (the pre-hook :meth:`park` registers)."""
        import torch

        if not self.parked:
            return
        opt = _torch_optimizer(optimizer)
        params = _params(opt)
        t0 = time.monotonic()
        state = torch.load(self.path, weights_only=True)
        if max(state, default=-1) >= len(params):
            raise RuntimeError(
                f"{self.path} holds state for {len(state)} parameters; the optimizer has {len(params)}"
            )
        for i, s in state.items():
            opt.state[params[i]] = s
        self.path.unlink(missing_ok=True)
        self.parked = False
        log.info("optimizer state restored in %.1fs", time.monotonic() - t0)
