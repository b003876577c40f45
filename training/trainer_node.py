"""``sesa trainers``: one trainer node of a run that spans machines (``cluster.trainers: external``).

It asks the orchestrator's coordinator for the run config, starts both roles' trainer jobs on this node
(``--nnodes cluster.trainer_nodes --node-rank N``, this node's share of each job's ranks, rendezvous at the
main address), and waits for them. A job that fails is named with its failed rank's log; the other job is
stopped; the exit code says which (0: both finished).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sesa_graph.cluster_config import ClusterConfig
from sesa_graph.owner_lock import OwnerLock
from tools.errors import UserError
from tools.ports import is_loopback
from training.coordinator import CoordinatorError, open_store, split_address
from training.trainer_jobs import Node, TrainerProcesses
from training.trainer_setup import config_differences, config_from_text


def node_of(cluster: ClusterConfig, node_rank: int | None, main_address: str | None) -> Node:
    """This node's place: --node-rank, else $NODE_RANK (torchrun's), else 0 on a single trainer node; the main
    address from --main-address, cluster.main_address, $MASTER_ADDR, else 127.0.0.1."""
    nodes = cluster.trainer_nodes
    if node_rank is None and os.environ.get("NODE_RANK", "").isdigit():
        node_rank = int(os.environ["NODE_RANK"])
    if node_rank is None:
        if nodes > 1:
            raise UserError(
                f"the run has {nodes} trainer nodes (cluster.trainer_nodes): give --node-rank 0..{nodes - 1}"
            )
        node_rank = 0
    if not 0 <= node_rank < nodes:
        raise UserError(f"--node-rank {node_rank}: the run has {nodes} trainer node(s) (0..{nodes - 1})")
    main = main_address or cluster.main_address or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    if not is_loopback(main) and not cluster.allow_remote:
        raise UserError(
            f"main address {main!r} is not loopback and the run's cluster.allow_remote is false: set it in the "
            "config the orchestrator runs"
        )
    return Node(node_rank, nodes, main)


def run_node(
    coordinator: str,
    workdir: Path,
    node_rank: int | None = None,
    config: Path | None = None,
    main_address: str | None = None,
    say: Callable[[str], None] = print,
) -> int:
    host, port = split_address(coordinator)
    if config is None and not is_loopback(host):
        raise UserError(
            f"--coordinator {coordinator} is not on this machine: give -c/--config, this node's copy of the run "
            "config; the node starts jobs only for a run config that equals its own"
        )
    try:
        store = open_store(host, port, False, 120.0)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - DistNetworkError / TimeoutError
        raise CoordinatorError(
            f"no coordinator answers at {coordinator} ({str(exc).splitlines()[0]}): start `sesa train` with "
            "cluster.trainers: external first, and check the address and port it prints"
        ) from None
    workdir = workdir.expanduser().resolve()
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--workdir {workdir}: cannot create it ({exc.strerror or exc})") from None
    lock = lock_workdir(workdir)  # before the jobs write checkpoints and logs there
    try:
        return _run_node(store, coordinator, workdir, node_rank, config, main_address, say)
    finally:
        lock.release()


def lock_workdir(workdir: Path) -> OwnerLock:
    """One ``sesa trainers`` per working folder: two would write the same checkpoints. (Its own lock file, not
    the run's: a node may work in the run directory of an orchestrator on the same machine.)"""

    def busy(holder: str) -> str:
        return (
            f"--workdir {workdir} is in use by another trainer node, {holder}; give each `sesa trainers` a "
            "folder of its own, or stop that one first"
        )

    return OwnerLock(workdir / "trainer-node.lock", busy)


def _run_node(
    store: Any,
    coordinator: str,
    workdir: Path,
    node_rank: int | None,
    config: Path | None,
    main_address: str | None,
    say: Callable[[str], None],
) -> int:
    cfg = config_from_text(store.get("config").decode(), workdir / "config.yaml")
    if config is not None:
        from sesa_graph.config import load_config

        diff = config_differences(load_config(config), cfg)
        if diff:
            raise UserError(
                f"{config} differs from the run config of the orchestrator at {coordinator}:\n  "
                + "\n  ".join(diff)
            )
    if cfg.cluster.trainers != "external":
        raise UserError(
            f"the run at {coordinator} starts its own trainers (cluster.trainers: local); set cluster.trainers: "
            "external in its config to run them here"
        )
    node = node_of(cfg.cluster, node_rank, main_address)
    jobs = TrainerProcesses(workdir, cfg, coordinator, node, local=False)
    say(
        f"trainer node {node.rank} of {node.count}: both roles' jobs ({', '.join(f'{r} {cfg.train.ranks(r) // node.count} rank(s)' for r in ('solver', 'proposer'))} here), "
        f"rendezvous at {node.main_address}, logs in {workdir / 'logs'}"
    )
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        jobs.start()
        while True:
            if (failed := jobs.failed()) is not None:
                role, msg = failed
                # the orchestrator stops at once with this message, instead of waiting for a job that never
                # comes (a rendezvous that timed out, a port in use, a crash before rank 0 connected)
                report(store, role, f"trainer node {node.rank}: {msg}")
                say(f"error: {msg}")
                return 1
            if all(p.poll() is not None for p in jobs.procs.values()):
                break
            time.sleep(0.5)
        say(f"both trainer jobs finished on node {node.rank}")
        return 0
    except KeyboardInterrupt:
        say("stopped")
        return 130
    finally:
        jobs.stop()
        signal.signal(signal.SIGTERM, previous)


def report(store: Any, role: str, message: str) -> None:
    """Put a job's failure where the orchestrator looks (unless rank 0 already said why)."""
    try:
        if not store.check([f"error/{role}"]):
            store.set(f"error/{role}", message)
    except Exception as exc:  # noqa: BLE001 - the orchestrator may be what is gone
        print(f"could not report to the coordinator: {exc}")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
