"""Room on the disk before each trainer checkpoint: a checkpoint is the model and AdamW's two moments in fp32
(about 12 bytes a parameter: 1.5 GiB for the 135M default), and one that fills the disk half-way through left a
run with a traceback and a directory to clean by hand. :class:`DiskCheck` checks before a byte of it is
written and stops the trainer with one line naming the directory, the room and the need; the run's committed
steps are kept, so `sesa train --resume` goes on once space is freed."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tools.errors import ServiceError
from training.run_disk import tree_bytes

CHECKPOINT_BYTES_PER_PARAM = 12  # fp32 weights + AdamW's exp_avg and exp_avg_sq
MARGIN = 1.1  # the scheduler, RNG and trainer state, and the filesystem's own overhead


class DiskFullError(ServiceError):
    pass


def checkpoint_need(out_dir: Path, params: int) -> int:
    """Bytes the next checkpoint in ``out_dir`` takes: the last one's size when there is one (the same
    model and optimizer), else 12 bytes a parameter; both with a 10% margin."""
    last = sorted(out_dir.glob("checkpoint-*"), key=lambda p: p.stat().st_mtime) if out_dir.is_dir() else []
    size = tree_bytes(last[-1]) if last else params * CHECKPOINT_BYTES_PER_PARAM
    return int(size * MARGIN)


def check_room(out_dir: Path, need: int) -> None:
    """Raise :class:`DiskFullError` when ``out_dir``'s filesystem has less than ``need`` bytes free."""
    probe = out_dir if out_dir.exists() else next(p for p in out_dir.parents if p.exists())
    free = shutil.disk_usage(probe).free
    if free < need:
        raise DiskFullError(
            f"not enough disk for the next checkpoint in {out_dir}: {free / 2**30:.2f} GiB free, about "
            f"{need / 2**30:.2f} GiB needed; free space there (`sesa runs --prune NAME` removes a finished run's "
            "checkpoints), then `sesa train --resume` goes on from the last committed step"
        )


def disk_check_callback(out_dir: Path, params: int) -> Any:
    """A transformers ``TrainerCallback`` that checks the room when the step about to end will save."""
    from transformers import TrainerCallback

    class DiskCheck(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if control.should_save and state.is_world_process_zero:
                check_room(out_dir, checkpoint_need(out_dir, params))
            return control

    return DiskCheck()
