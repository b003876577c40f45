"""The network barrier between the orchestrator and the trainer jobs: a ``torch.distributed.TCPStore`` that
``sesa train`` hosts (:class:`Coordinator`) and each trainer job's rank 0 joins (:class:`TrainerLink`).

Per step t and role (the same protocol whether the trainers run beside the orchestrator or on other nodes):
1. rank 0 publishes the weights of version t (a file path, or the files themselves through the store:
   ``cluster.weights``) and sets ``ready/<role>/<t>``;
2. the orchestrator loads them into the rollout policies, runs the self-play step, keeps the shards on its
   own disk (the run's record, read by ``--resume``), puts both roles' shards in the store and sets
   ``commit/<t>`` -- the commit point;
3. rank 0 takes its role's shard and hands each rank its slice over the job's own process group.

A trainer at a step the orchestrator committed before a restart (``--resume`` after a trainer checkpoint
older than the last commit) gets that step's stored shard again. Both sides beat (``hb/<who>`` counters,
every ``cluster.heartbeat_s``); a counter that stops moving for ``cluster.node_timeout_s`` names the lost
side, and a store connection that closes ends the waiting side at once. Keys live in the orchestrator's
memory and are deleted once read, so the store holds at most a step's shards and weights.
"""

from __future__ import annotations

import datetime
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from sesa_graph.cluster_config import ClusterConfig
from sesa_graph.weights_wire import drop
from tools.errors import ServiceError, UserError
from training.sync import PeerDiedError

log = logging.getLogger(__name__)
ROLES = ("proposer", "solver")


class CoordinatorError(ServiceError, RuntimeError):
    """The coordinator cannot be hosted or reached; the message names the address and the setting."""


def open_store(host: str, port: int, master: bool, timeout_s: float) -> Any:
    """A client of the store at ``host:port``, or with ``master`` the store itself, listening on ``host``
    only: torch's TCPStore server binds every interface whatever host it is given, so the master gets a
    socket bound here (``master_listen_fd``; the store owns it from then on). With SESA_COORDINATOR_TOKEN set
    its values are signed (training.signed_store); beyond loopback the token is required."""
    from torch.distributed import TCPStore

    from tools.ports import is_loopback
    from training.signed_store import TOKEN_ENV, SignedStore, coordinator_token

    token = coordinator_token()
    if token is None and not is_loopback(host):
        raise UserError(
            f"the coordinator at {host}:{port} is not on loopback, and its store has no authentication of its "
            f"own: set {TOKEN_ENV} to the same secret on the orchestrator's node and on every trainer node "
            "(e.g. `export SESA_COORDINATOR_TOKEN=$(openssl rand -hex 32)` where the job script starts)"
        )
    fd = None
    if master:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        port, fd = sock.getsockname()[1], sock.detach()
    store = TCPStore(
        host,
        port,
        is_master=master,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=timeout_s),
        master_listen_fd=fd,
    )
    return SignedStore(store, token) if token is not None else store


def split_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` as given to ``--coordinator``.

    >>> split_address("10.0.0.1:29530")
    ('10.0.0.1', 29530)
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--coordinator {address!r}: give HOST:PORT, e.g. 127.0.0.1:29530")
    return host, int(port)


class Beat:
    """A counter this process increments every ``interval_s`` on its own connection (a blocking transfer on
    the main connection must not delay it)."""

    def __init__(self, host: str, port: int, key: str, interval_s: float) -> None:
        self.store = open_store(host, port, False, 30.0)
        self.key, self.interval_s = key, interval_s
        self._stop = threading.Event()
        self.store.add(key, 1)
        threading.Thread(target=self._run, name=f"beat-{key}", daemon=True).start()

    def _run(self) -> None:
        failures = 0
        while not self._stop.wait(self.interval_s):
            try:
                self.store.add(self.key, 1)
                failures = 0
            except Exception:  # noqa: BLE001 - a slow moment, or the other side is gone (its watcher says so)
                failures += 1
                if failures >= 3:
                    return

    def stop(self) -> None:
        self._stop.set()


class Watch:
    """When a counter last moved, on this process's clock (the nodes' clocks need not agree). ``expect``: a
    counter that never appears counts as stale from when watching began (peers that joined already)."""

    def __init__(self, expect: bool = False) -> None:
        self.seen: dict[str, tuple[int, float]] = {}
        self.expect, self.began = expect, time.monotonic()

    def stale_for(self, store: Any, key: str) -> float | None:
        """Seconds since ``key`` last moved; before its first beat None (or, expected, since watching began)."""
        if not store.check([key]):
            return time.monotonic() - self.began if self.expect else None
        value, now = store.add(key, 0), time.monotonic()
        last = self.seen.get(key)
        if last is None or last[0] != value:
            self.seen[key] = (value, now)
            return 0.0
        return now - last[1]


class Coordinator:
    """The orchestrator's side: hosts the store, publishes the run's config, beats, and answers trainers."""

    def __init__(self, cluster: ClusterConfig, config_yaml: str, run: dict[str, Any]) -> None:
        self.cluster = cluster
        host, port = cluster.coordinator_host, cluster.coordinator_port or 0
        try:
            self.store = open_store(host, port, True, 60.0)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - the bind's OSError, torch's DistNetworkError or RuntimeError
            raise CoordinatorError(
                f"cannot host the coordinator on {host}:{port} ({str(exc).splitlines()[0]}): "
                + (
                    "the port is in use; give cluster.coordinator_port another or stop what listens there"
                    if "in use" in str(exc).lower()
                    else "check cluster.coordinator_host is an address of this machine"
                )
            ) from None
        self.host, self.port = host, int(self.store.port)
        self.store.set("config", config_yaml)
        self.store.set("run", json.dumps(run))
        self.beat = Beat(
            "127.0.0.1" if host in ("0.0.0.0", "::") else host,
            self.port,
            "hb/orchestrator",
            cluster.heartbeat_s,
        )
        self.watch = Watch()
        self.served: set[tuple[str, int]] = set()
        self.bytes_sent: dict[str, int] = {}

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # ---- liveness -----------------------------------------------------------------------------------
    def trainer_trouble(self, roles: tuple[str, ...] = ROLES) -> str | None:
        """A message naming a trainer job that reported a failure or whose heartbeat stopped."""
        for role in roles:
            if self.done(role) is not None:  # finished: its beat has stopped for good
                continue
            if self.store.check([f"error/{role}"]):
                return self.store.get(f"error/{role}").decode(errors="replace")
            stale = self.watch.stale_for(self.store, f"hb/{role}")
            if stale is not None and stale > self.cluster.node_timeout_s:
                where = self.hello(role) or {}
                return (
                    f"the {role} trainer job (rank 0 on {where.get('host', '?')}, pid {where.get('pid', '?')}) "
                    f"sent no heartbeat for {stale:.0f}s (cluster.node_timeout_s {self.cluster.node_timeout_s:g}): "
                    "its node or process is gone, or hangs (stopped, swapping)"
                )
        return None

    def hello(self, role: str) -> dict[str, Any] | None:
        key = f"hello/{role}"
        return json.loads(self.store.get(key)) if self.store.check([key]) else None

    # ---- the step barrier -----------------------------------------------------------------------------
    def ready(self, role: str, step: int) -> dict[str, Any] | None:
        key = f"ready/{role}/{step}"
        return json.loads(self.store.get(key)) if self.store.check([key]) else None

    def wait_ready(
        self,
        step: int,
        timeout_s: float,
        alive: Callable[[], str | None],
        replay: Callable[[str, int], tuple[dict[str, Any], bytes]],
        poll_s: float = 0.1,
    ) -> dict[str, dict[str, Any]]:
        """Both roles' ready messages of ``step``; meanwhile a trainer at an earlier, committed step gets its
        stored shard again (``replay(role, s)`` -> metrics, shard)."""
        deadline = time.monotonic() + timeout_s
        out: dict[str, dict[str, Any]] = {}
        while True:
            for role in ROLES:
                if role not in out and (msg := self.ready(role, step)) is not None:
                    out[role] = msg
                    self._forget(role, step - 1)
            if len(out) == len(ROLES):
                return out
            self._serve_replays(step, replay)
            if (dead := alive() or self.trainer_trouble()) is not None:
                raise PeerDiedError(f"{dead} (while waiting for the trainers' step {step})")
            if time.monotonic() > deadline:
                missing = [r for r in ROLES if r not in out]
                never = [r for r in missing if self.hello(r) is None]
                hint = (
                    f"; {', '.join(never)} never connected to the coordinator at {self.address}: start "
                    f"`sesa trainers --coordinator {self.address} --node-rank N` on each trainer node"
                    if never
                    else ""
                )
                raise PeerDiedError(
                    f"waited {timeout_s:.0f}s (train.wait_timeout_s) for the {', '.join(missing)} trainer's "
                    f"step {step}{hint}"
                )
            time.sleep(poll_s)

    def _serve_replays(self, step: int, replay: Callable[[str, int], tuple[dict[str, Any], bytes]]) -> None:
        for role in ROLES:
            for s in range(max(0, step - 64), step):  # a checkpoint is at most save_every steps behind
                if (role, s) not in self.served and self.store.check([f"ready/{role}/{s}"]):
                    sent = json.loads(self.store.get(f"ready/{role}/{s}"))["weights"]
                    if sent.get("kind") == "store":  # a replayed step's weights were served long ago
                        drop(self.store, sent["prefix"])
                    metrics, shard = replay(role, s)
                    self._forget(role, s - 1)
                    self.store.set(f"shard/{s}/{role}", shard)
                    self.store.set(f"commit/{s}", json.dumps(metrics))
                    self.served.add((role, s))
                    log.info("replayed step %d's committed %s shard to its resumed trainer", s, role)

    def commit(self, step: int, shards: dict[str, bytes], metrics: dict[str, Any]) -> None:
        for role, data in shards.items():
            self.store.set(f"shard/{step}/{role}", data)
            self.bytes_sent[f"shard/{role}"] = self.bytes_sent.get(f"shard/{role}", 0) + len(data)
            self.served.add((role, step))
        self.store.set(f"commit/{step}", json.dumps(metrics, default=str))

    def _forget(self, role: str, step: int) -> None:
        """A trainer ready for step t has read step t-1's shard."""
        if step >= 0:
            self.store.delete_key(f"shard/{step}/{role}")
            self.store.delete_key(f"ready/{role}/{step}")

    # ---- the end --------------------------------------------------------------------------------------
    def done(self, role: str) -> dict[str, Any] | None:
        key = f"done/{role}"
        return json.loads(self.store.get(key)) if self.store.check([key]) else None

    def wait_done(
        self,
        steps: int,
        timeout_s: float,
        alive: Callable[[], str | None],
        replay: Callable[[str, int], tuple[dict[str, Any], bytes]],
        poll_s: float = 0.2,
    ) -> dict:
        """Both trainers' final messages (their last update is saved); a trainer resumed behind the last of
        ``steps`` committed steps gets their shards again."""
        deadline = time.monotonic() + timeout_s
        while not all(self.done(r) for r in ROLES):
            self._serve_replays(steps, replay)
            if (dead := alive() or self.trainer_trouble()) is not None:
                raise PeerDiedError(f"{dead} (while waiting for the trainers' last update)")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the trainers did not finish their last step in {timeout_s:.0f}s")
            time.sleep(poll_s)
        return {r: self.done(r) for r in ROLES}

    def stop(self, reason: str) -> None:
        try:
            self.store.set("stop", reason)
        except Exception as exc:  # noqa: BLE001 - best effort on the way out
            log.debug("could not tell the trainers to stop: %s", exc)

    def close(self) -> None:
        self.beat.stop()


class TrainerLink:
    """A trainer job's rank 0 side: the run's config, its heartbeat, ready/commit/shard and failures."""

    def __init__(self, address: str, role: str, connect_timeout_s: float = 120.0) -> None:
        self.host, self.port = split_address(address)
        self.address, self.role = address, role
        try:
            self.store = open_store(self.host, self.port, False, connect_timeout_s)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - DistNetworkError / RuntimeError / TimeoutError
            raise CoordinatorError(
                f"the {role} trainer could not reach the coordinator at {address} within "
                f"{connect_timeout_s:.0f}s ({str(exc).splitlines()[0]}): is `sesa train` running there with "
                "cluster.coordinator_host/coordinator_port set to this address?"
            ) from None
        self.watch = Watch()
        self.node_timeout_s = 30.0
        self.beat: Beat | None = None

    def config_yaml(self) -> str:
        return self.store.get("config").decode()

    def run_info(self) -> dict[str, Any]:
        return json.loads(self.store.get("run"))

    def hello(self, info: dict[str, Any], heartbeat_s: float, node_timeout_s: float) -> None:
        self.node_timeout_s = node_timeout_s
        self.store.set(
            f"hello/{self.role}", json.dumps({"host": socket.gethostname(), **info, "time": time.time()})
        )
        self.beat = Beat(self.host, self.port, f"hb/{self.role}", heartbeat_s)

    def orchestrator_gone(self, store: Any = None, watch: Watch | None = None) -> str | None:
        store, watch = store or self.store, watch or self.watch
        try:
            if store.check(["stop"]):
                return f"the run stopped: {store.get('stop').decode(errors='replace')}"
            stale = watch.stale_for(store, "hb/orchestrator")
        except Exception as exc:  # noqa: BLE001 - the connection closed: the orchestrator is gone
            return f"the orchestrator at {self.address} is gone ({str(exc).splitlines()[0]})"
        if stale is not None and stale > self.node_timeout_s:
            return f"the orchestrator at {self.address} sent no heartbeat for {stale:.0f}s"
        return None

    def watch_orchestrator(self, interval_s: float, on_gone: Callable[[str], None]) -> None:
        """Call ``on_gone(why)`` from a thread of its own (an update in progress is not waited for)."""
        store, watch = open_store(self.host, self.port, False, 30.0), Watch()

        def run() -> None:
            while True:
                time.sleep(interval_s)
                if (why := self.orchestrator_gone(store, watch)) is not None:
                    on_gone(why)
                    return

        threading.Thread(target=run, name="orchestrator-watch", daemon=True).start()

    def ready(self, step: int, weights: dict[str, Any], update: dict[str, Any] | None = None) -> None:
        """Weights for ``step`` published; ``update``: TRL's logged numbers of the update that made them."""
        msg = {"step": step, "weights": weights} | ({"update": update} if update else {})
        self.store.set(f"ready/{self.role}/{step}", json.dumps(msg))

    def wait_commit(self, step: int, timeout_s: float, poll_s: float = 0.1) -> bytes:
        """Step ``step``'s shard of this role, once the orchestrator committed it."""
        deadline = time.monotonic() + timeout_s
        key = f"commit/{step}"
        while True:
            if (why := self.orchestrator_gone()) is not None:
                raise PeerDiedError(f"{why} (while waiting for step {step}'s trajectories)")
            if self.store.check([key]):
                return self.store.get(f"shard/{step}/{self.role}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"waited {timeout_s:.0f}s (train.wait_timeout_s) for step {step}'s trajectories"
                )
            time.sleep(poll_s)

    def fail(self, message: str) -> None:
        try:
            self.store.set(f"error/{self.role}", message)
        except Exception as exc:  # noqa: BLE001 - the orchestrator may be what failed
            log.debug("could not report the failure to the coordinator: %s", exc)

    def done(self, info: dict[str, Any]) -> None:
        self.store.set(f"done/{self.role}", json.dumps(info))
