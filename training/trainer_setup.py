"""How a trainer job comes up wherever it runs: rank 0 joins the orchestrator's coordinator and takes the
run's config from it (checked against this node's copy when one is given), hands it to the other ranks over
the job's own store, and every rank resumes from the same checkpoint -- copied from rank 0 when the ranks'
nodes share no filesystem."""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sesa_graph.config import RunConfig, load_config
from sesa_graph.reference_values import flatten
from sesa_graph.weights_wire import drop, fetch_dir, put_dir
from tools.errors import UserError
from training.coordinator import TrainerLink
from training.ranks import JobStore, Rank, exit_now

log = logging.getLogger("sesa.trainer")

# where each node's copy may differ: the addresses a site substitutes at launch
PER_NODE_KEYS = ("cluster.coordinator_host", "cluster.main_address")


@dataclass
class Setup:
    cfg: RunConfig
    link: TrainerLink | None  # rank 0 only
    jobs: JobStore | None  # jobs of more than one rank


def config_differences(ours: RunConfig, theirs: RunConfig) -> list[str]:
    """Keys whose values differ, as ``key: ours != theirs``."""
    a, b = flatten(ours.model_dump(mode="json")), flatten(theirs.model_dump(mode="json"))
    return [
        f"{k}: {a.get(k)!r} here, {b.get(k)!r} at the orchestrator"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k) and k not in PER_NODE_KEYS
    ]


def config_from_text(text: str, where: Path) -> RunConfig:
    where.parent.mkdir(parents=True, exist_ok=True)
    if not where.exists() or where.read_text() != text:
        where.write_text(text)
    return load_config(where)


def come_up(
    workdir: Path,
    role: str,
    rank: Rank,
    job_log: Path,
    coordinator: str,
    own_config: Path | None,
    connect_timeout_s: float,
) -> Setup:
    link, text = None, None
    if rank.main:
        link = TrainerLink(coordinator, role, connect_timeout_s)
        text = link.config_yaml()
    jobs = JobStore(rank, connect_timeout_s) if rank.world > 1 else None
    if jobs is not None:
        text = jobs.share("config", text)
    assert text is not None
    cfg = config_from_text(text, workdir / "config.yaml")
    if own_config is not None and rank.main:
        diff = config_differences(load_config(own_config), cfg)
        if diff:
            message = (
                f"{own_config} differs from the run config of the orchestrator at {coordinator}:\n  "
                + "\n  ".join(diff)
                + "\nuse the same file on every node, or leave -c out to take the orchestrator's"
            )
            link.fail(f"the {role} trainer refused to start: {message}")  # type: ignore[union-attr]
            raise UserError(message)
    if rank.world != cfg.train.ranks(role):
        raise UserError(
            f"the {role} trainer was started with {rank.world} ranks; the run config gives "
            f"train.trainer_ranks.{role} = {cfg.train.ranks(role)}"
        )
    cl = cfg.cluster
    if jobs is not None:
        jobs.join(role, job_log, cfg.train.join_timeout_s)

        def lost(message: str) -> None:
            if link is not None:
                link.fail(message)
            exit_now(message)

        jobs.watch_peers(role, cl.heartbeat_s, cl.node_timeout_s, lost)
    if link is not None:
        info = {"pid": os.getpid(), "workdir": str(workdir.resolve()), "world": rank.world}
        link.hello(info, cl.heartbeat_s, cl.node_timeout_s)
        link.watch_orchestrator(cl.heartbeat_s, lambda why: exit_now(f"{why}: stopping the {role} trainer"))
    return Setup(cfg, link, jobs)


def latest_checkpoint(out_dir: Path) -> str | None:
    """The newest complete checkpoint; newer incomplete ones are removed.

    transformers writes ``trainer_state.json`` last (after weights, optimizer, scheduler and RNG state), so
    a trainer killed while saving leaves a directory without a readable one; resuming from it would crash,
    and the checkpoint before it (kept until the new one is complete) holds the state to go on from.
    """
    ckpts = sorted(
        (p for p in out_dir.glob("checkpoint-*") if p.name.split("-")[1].isdigit()),
        key=lambda p: int(p.name.split("-")[1]),
    )
    while ckpts:
        newest = ckpts.pop()
        try:
            json.loads((newest / "trainer_state.json").read_text())
        except (OSError, ValueError):
            log.warning("%s is incomplete (the trainer was stopped while saving it); removing it", newest)
            shutil.rmtree(newest, ignore_errors=True)
            continue
        if not any(newest.glob("optimizer*")):
            # transformers would resume without it, silently, with AdamW's moments at zero
            raise UserError(
                f"{newest} has no optimizer state (optimizer.pt): a resume from it would restart AdamW from "
                "zero. Restore the file, or delete the checkpoint directory to resume from the one before it "
                "(or from the start when it is the only one)"
            )
        return str(newest)
    return None


def shared_checkpoint(out_dir: Path, rank: Rank, jobs: JobStore | None, sharded: bool) -> str | None:
    """The checkpoint every rank resumes from: rank 0's newest complete one. A rank whose node lacks it gets
    its files from rank 0 through the job's store (its own RNG state is kept); a sharded (FSDP2) checkpoint
    is one directory all ranks write, so its nodes must share a filesystem."""
    if jobs is None:
        return latest_checkpoint(out_dir)
    name = jobs.share(
        "resume", (Path(c).name if (c := latest_checkpoint(out_dir)) else "") if rank.main else None
    )
    if not name:
        return None
    here = out_dir / name
    need = not (here / "trainer_state.json").exists()
    if need and sharded:
        raise UserError(
            f"{here} is not on this node: the trainers' FSDP2 checkpoints need a filesystem every trainer "
            "node shares (give each node the same --workdir on it)"
        )
    if not rank.main:
        jobs.store.set(f"sesa/ckpt-need/rank{rank.rank}", "1" if need else "0")
    prefix = f"sesa/ckpt/{name}"
    if rank.main:
        wanted = [jobs.store.get(f"sesa/ckpt-need/rank{r}") == b"1" for r in range(1, rank.world)]
        if any(wanted):
            sent = put_dir(jobs.store, prefix, here, 0)
            log.info("sent checkpoint %s (%d bytes) to the ranks whose nodes lack it", name, sent)
        jobs.store.set(f"sesa/ckpt-sent/{name}", "1")
        return str(here)
    jobs.store.get(f"sesa/ckpt-sent/{name}")
    if need:
        own = [p for p in here.glob(f"rng_state_{rank.rank}.pth")] if here.exists() else []
        keep = {p.name: p.read_bytes() for p in own}
        fetch_dir(jobs.store, prefix, here)
        for f in here.glob("rng_state_*.pth"):
            f.unlink()
        for fname, data in keep.items():
            (here / fname).write_bytes(data)
        (here / "VERSION").unlink(missing_ok=True)
        log.info("rank %d: took checkpoint %s from rank 0", rank.rank, name)
    return str(here)


def cleanup_sent(jobs: JobStore | None, rank: Rank, checkpoint: Any) -> None:
    """Rank 0 frees the store's copy of a sent checkpoint once every rank has resumed."""
    if jobs is not None and rank.main and checkpoint:
        drop(jobs.store, f"sesa/ckpt/{Path(checkpoint).name}")
