"""What a trainer rank exchanges with the orchestrator each self-play step (:class:`StepFeed`, TRL's
``rollout_func``): its weights out -- checked equal across ranks, written by rank 0, sent the run's way
(file, coordinator store, NCCL) -- and the step's committed trajectories in, each rank its slice."""

from __future__ import annotations

import io
import logging
import time
from pathlib import Path
from typing import Any

from sesa_graph.config import RunConfig
from tools.errors import UserError
from training.ranks import Rank
from training.sync import SyncDir
from training.trainer_rows import rows_for_training, update_record

log = logging.getLogger("sesa.trainer")  # the trainer's own log, where these lines always went


class StepFeed:
    """What a trainer rank does at the start of each self-play step, as TRL's ``rollout_func``: publish its
    weights, wait for the step's committed trajectories and take its slice of them."""

    def __init__(
        self,
        cfg: RunConfig,
        role: str,
        rank: Rank,
        link: Any,
        sync: SyncDir,
        transport: str,
        batch: int,
        tokenizer: Any,
    ) -> None:
        self.cfg, self.role, self.rank, self.link, self.sync = cfg, role, rank, link, sync
        self.transport, self.batch, self.tokenizer = transport, batch, tokenizer
        self.pcfg = cfg.solver_policy if role == "solver" else cfg.proposer_policy
        self.turn = None
        if cfg.train.one_update_at_a_time and rank.world == 1 and cfg.cluster.trainers == "local":
            from training.update_turn import UpdateTurn

            self.turn = UpdateTurn(sync.root / "update.lock")
        self.handed: float | None = None  # when TRL got the last batch: its update's time starts there
        self.parking = None
        if cfg.train.park_optimizer and self.pcfg.device == "cpu":
            from training.optimizer_park import ParkedOptimizer

            self.parking = ParkedOptimizer(sync.root / f"optimizer-{role}-{rank.rank}.pt")

    def publish(self, trainer: Any, step: int) -> None:
        """Every rank joins the gather (FSDP2) or the check that all hold the same weights (DDP); rank 0
        writes them and tells the orchestrator where they are."""
        import torch

        took = None if self.handed is None else time.monotonic() - self.handed
        cfg, rank, role, link = self.cfg, self.rank, self.role, self.link
        acc = trainer.accelerator
        state = acc.get_state_dict(trainer.model_wrapped) if self.transport != "nccl" else {}
        if rank.world > 1 and cfg.train.sharding == "none" and state:
            prints = acc.gather(torch.tensor([fingerprint(state)], dtype=torch.float64)).tolist()
            if len(set(prints)) > 1:
                raise RuntimeError(
                    f"step {step}: the {role} trainer's ranks hold different weights: {prints}"
                )
        if state and rank.main:
            check_finite(state, role, step)
        where = (
            publish_state(
                self.sync,
                role,
                step,
                acc.unwrap_model(trainer.model_wrapped),
                state,
                rank,
                getattr(torch, self.pcfg.dtype),
            )
            if state
            else None
        )
        acc.wait_for_everyone()
        if link is not None:
            link.ready(
                step,
                send_weights(link, self.transport, role, step, where),
                update_record(trainer.state.log_history, took),
            )
            log.info("weights for step %d published; waiting for the step's trajectories", step)

    def rollout_func(self, prompts: list, trainer: Any) -> dict[str, list]:
        import torch

        cfg, rank, batch = self.cfg, self.rank, self.batch
        step = trainer.state.global_step // cfg.train.updates_per_step  # the self-play step
        if len(prompts) * rank.world != batch:
            raise RuntimeError(
                f"step {step}: TRL gave rank {rank.rank} {len(prompts)} prompts of a {batch} batch"
            )
        self.publish(trainer, step)
        if self.parking is not None:
            self.parking.park(trainer.optimizer)
        if self.pcfg.device == "cpu":
            from sesa_graph.policy.local import release_freed_memory

            release_freed_memory()  # the wait for rollouts is when the servers and the orchestrator need it
        if self.turn is not None:
            self.turn.give()  # the last update is done and its memory given back
        rows = None
        if self.link is not None:
            import pandas as pd

            shard = self.link.wait_commit(step, cfg.train.wait_timeout_s)
            rows = rows_for_training(
                pd.read_parquet(io.BytesIO(shard)),
                batch,
                self.role,
                step,
                cfg.train.max_completion_length,
                end_marker=self.tokenizer.eos_token_id,
            )
        if rank.world == 1:
            assert rows is not None
            if self.turn is not None:
                waited = self.turn.take()
                if waited > 1:
                    log.info("step %d: waited %.0fs for the other trainer's update", step, waited)
            self.handed = time.monotonic()
            return rows
        # rank 0 alone talks to the orchestrator; each rank gets its slice over the job's process group
        mine: list[Any] = [None]
        slices = [rank_slice(rows, r, rank.world) for r in range(rank.world)] if rows is not None else None
        torch.distributed.scatter_object_list(mine, slices, src=0)
        self.handed = time.monotonic()
        return mine[0]


def check_finite(state: dict[str, Any], role: str, step: int) -> None:
    """A UserError naming the first tensor of ``state`` that holds NaN or inf: such weights would be served and
    trained on without a word (the rollouts would only read as garbage)."""
    import torch

    for name, t in state.items():
        if torch.is_floating_point(t) and not bool(torch.isfinite(t).all()):
            raise UserError(
                f"step {step}: the {role} trainer's weights hold NaN or inf ({name}, first of them) after its "
                f"last update, so they are not published; lower train.learning_rate "
                f"and see logs/{role}-trainer.log for the loss and grad_norm that led there"
            )


def rank_slice(rows: dict[str, list], rank: int, world: int) -> dict[str, list]:
    """Rank ``rank``'s contiguous share of a step's rows (whole groups when the config's checks held).

    >>> rank_slice({"reward": [1, 2, 3, 4]}, 1, 2)
    {'reward': [3, 4]}
    """
    n = len(rows["reward"]) // world
    return {k: v[rank * n : (rank + 1) * n] for k, v in rows.items()}


def fingerprint(state: dict[str, Any]) -> float:
    """A float64 sum over every weight: equal on ranks that hold the same model (DDP keeps them so)."""
    import torch

    return float(sum(t.detach().double().sum() for t in state.values() if torch.is_floating_point(t)))


def publish_state(
    sync: SyncDir, role: str, step: int, model: Any, state: dict, rank: Rank, serve_dtype: Any = None
) -> Path | None:
    """Rank 0 writes the full ``state`` (gathered by every rank before) as version ``step`` and returns its
    directory; the other ranks write nothing, so one directory never has two writers. Floating weights are
    written in ``serve_dtype`` when that is narrower: the rollout policy would round them on loading anyway,
    and half the bytes cross the network (fp32 master weights of an 8B model are 30.5 GiB, bf16 15.3)."""
    if not rank.main:
        return None
    # a gathered state dict holds a tied weight twice; the file, like save_pretrained's own, holds it once
    tied = getattr(model, "all_tied_weights_keys", None) or {}
    state = {k: v for k, v in state.items() if k not in tied}
    if serve_dtype is not None:
        state = {
            k: v.to(serve_dtype) if v.is_floating_point() and v.element_size() > serve_dtype.itemsize else v
            for k, v in state.items()
        }
    return sync.publish_weights(
        role, step, lambda d: model.save_pretrained(d, state_dict=state, safe_serialization=True)
    )


def send_weights(link: Any, transport: str, role: str, step: int, path: Path | None) -> dict[str, Any]:
    """The ready message's ``weights``: where the orchestrator finds version ``step``."""
    if transport == "file":
        return {"kind": "file", "path": str(path), "version": step}
    if transport == "store":
        from sesa_graph.weights_wire import put_dir

        prefix = f"weights/{role}/{step}"
        return {"kind": "store", "prefix": prefix, "bytes": put_dir(link.store, prefix, path, step)}
    return {"kind": "nccl", "version": step}  # TRL pushed them into the vLLM server itself
