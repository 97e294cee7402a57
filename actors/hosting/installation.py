"""One installation across processes: its owner, its attached clients, its keeper.

The owner (`recovery up`, or the process whose `RecoveryRuntime.start()` took the owner
lease) creates the circuit hosts and the route hosts, records the installation in Redis
(host rings, Ray address, settings without secrets; actors/store/installation.py), runs
the keeper and is the only one to stop the hosts. Any other process attaches: it reads
the ring and the Ray address from the record, so no client setting can make two hosts own
one route, and a client whose own settings differ is refused naming the first differing
setting. The keeper renews the lease and recreates a route or circuit host that vanished
(killed for good, removed by another process) with the installation's settings; the new
host rehydrates what it owns.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import ray
import redis
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.engine.config import DEFAULT_DATA_DIR
from actors.engine.settings import EngineSettings
from actors.errors import RecoveryError, error_report
from actors.hosting.circuit_host import CircuitHost
from actors.hosting.names import NAMESPACE, circuit_host_name, host_id, host_name
from actors.hosting.ray_connect import gcs_address
from actors.hosting.route_host import RouteHost
from actors.keys import KeySpace
from actors.store.embedded import EmbeddedRedis
from actors.store.installation import (
    InstallationRecord,
    NoInstallationError,
    OwnerLease,
    read_installation,
)

OWNER_TTL_S: Final = 10.0
KEEP_EVERY_S: Final = 2.0
RECORD_WAIT_S: Final = 60.0
RECORD_POLL_S: Final = 0.1
HOST_STOP_TIMEOUT_S: Final = 30.0
HOST_STOP_POLL_S: Final = 0.05

log = logging.getLogger(__name__)

RemoteRouteHost = ray.remote(max_restarts=-1, max_task_retries=-1)(RouteHost)
RemoteCircuitHost = ray.remote(max_restarts=-1, max_task_retries=-1)(CircuitHost)


class InstallationMismatchError(RecoveryError):
    """This process asks for a setting the live installation under its prefix does not
    run with (a different host ring would make two hosts own one route)."""

    def __init__(self, prefix: str, setting: str, wanted: object, recorded: object) -> None:
        self.prefix = prefix
        self.setting = setting
        self.wanted = wanted
        self.recorded = recorded
        super().__init__(
            f"installation {prefix!r} runs with {setting}={recorded!r}, this process asks for "
            f"{setting}={wanted!r}: use the installation's settings, or "
            "RecoveryRuntime.attach() to adopt them"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.prefix, self.setting, self.wanted, self.recorded))


def first_mismatch(
    record: InstallationRecord, host_count: int, virtual_nodes: int, settings: EngineSettings
) -> tuple[str, object, object] | None:
    """The first of this process's settings the installation does not run with, as
    (setting, this process's value, the installation's); None when they all agree."""
    if host_count != record.host_count:
        return "hosts", host_count, record.host_count
    if virtual_nodes != record.virtual_nodes:
        return "virtual_nodes", virtual_nodes, record.virtual_nodes
    recorded = EngineSettings.from_public(record.settings, settings.installation_key)
    difference = settings.first_difference(recorded)
    if difference is None and settings.key_digest() != record.key_digest:
        return "installation_key", "<withheld>", "<withheld>"
    return difference


def refuse_mismatch(
    record: InstallationRecord, host_count: int, virtual_nodes: int, settings: EngineSettings
) -> None:
    """Raise InstallationMismatchError for the first setting the installation differs in."""
    found = first_mismatch(record, host_count, virtual_nodes, settings)
    if found is not None:
        raise InstallationMismatchError(settings.key_prefix, *found)


def new_token() -> str:
    """An owner token that says which process holds the lease."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def live_record(
    connection: redis.Redis, keys: KeySpace, lease: OwnerLease
) -> InstallationRecord | None:
    """The record of the live owner (it writes it once its hosts are ready, right after
    taking the lease), or None when no owner holds the lease any more and `lease` could
    take it. Raises NoInstallationError when the owner records nothing in time.

    An owner counts as live once it is seen renewing its lease (its keeper renews every
    KEEP_EVERY_S): the lease of an owner killed a moment ago stays for its TTL, and
    joining it would attach to the Ray cluster that died with it (chaos bug C)."""
    deadline = time.monotonic() + RECORD_WAIT_S
    # (holder, the least its lease had left when looked at): more later is a renewal
    lowest: tuple[str, int] | None = None
    renewing: str | None = None
    while time.monotonic() < deadline:
        holder, remaining_ms = lease.holder_and_remaining_ms()
        if holder is None and lease.claim():
            return None
        if holder is not None and holder != renewing:
            if lowest is not None and lowest[0] == holder and remaining_ms > lowest[1]:
                renewing = holder
            elif lowest is None or lowest[0] != holder or remaining_ms < lowest[1]:
                lowest = (holder, remaining_ms)
        record = read_installation(connection, keys) if renewing is not None else None
        if record is not None and record.owner == holder == renewing:
            return record
        time.sleep(RECORD_POLL_S)  # the owner is starting its hosts, or renewing: bounded
    raise NoInstallationError(
        f"installation {keys.prefix!r} has an owner that recorded nothing within "
        f"{RECORD_WAIT_S:g} s"
    )


def embedded_url(data_dir: Path | None) -> str:
    folder = data_dir or Path(os.environ.get("RECOVERY_DATA_DIR") or DEFAULT_DATA_DIR)
    embedded = EmbeddedRedis(folder.expanduser())
    if not embedded.socket_path.exists():
        raise NoInstallationError(
            f"no Redis to attach to: no REDIS_URL and no embedded Redis at {embedded.socket_path}"
        )
    return embedded.url


def refuse_ring_change(record: InstallationRecord, host_count: int, virtual_nodes: int) -> None:
    """A new owner may change settings, never the host ring: routes are indexed by host."""
    for setting, wanted, recorded in (
        ("hosts", host_count, record.host_count),
        ("virtual_nodes", virtual_nodes, record.virtual_nodes),
    ):
        if wanted != recorded:
            raise InstallationMismatchError(
                record.settings["key_prefix"], setting, wanted, recorded
            )


def new_record(
    settings: EngineSettings, host_count: int, virtual_nodes: int, *, owner: str
) -> InstallationRecord:
    """The record an owner writes once its hosts are ready (in this process's Ray)."""
    return InstallationRecord(
        host_names=tuple(host_name(settings.key_prefix, i) for i in range(host_count)),
        circuit_host_names=tuple(
            circuit_host_name(settings.key_prefix, i) for i in range(settings.circuit_hosts)
        ),
        virtual_nodes=virtual_nodes, ray_address=gcs_address(), settings=settings.public(),
        key_digest=settings.key_digest(), owner=owner, started_at=datetime.now(UTC),
    )  # fmt: skip


# -- the owner's hosts ---------------------------------------------------------------------


def create_host(
    prefix: str, index: int, url: str, settings: EngineSettings, nodes: Sequence[str]
) -> Any:
    """The named, detached host `index` (found when it exists), placed by `spread` over
    `nodes` (`alive_nodes()`, read once for all the hosts being created)."""
    return RemoteRouteHost.options(
        name=host_name(prefix, index), namespace=NAMESPACE, get_if_exists=True, num_cpus=0,
        lifetime="detached", scheduling_strategy=spread(index, nodes),
    ).remote(host_id(index), url, settings)  # fmt: skip


def alive_nodes() -> list[str]:
    """The cluster's alive nodes, by id."""
    return sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])  # type: ignore[no-untyped-call]  # Ray ships it untyped


def spread(index: int, nodes: Sequence[str]) -> Any:
    """Host `index` on the cluster's alive nodes in turn (by node id), so that Ray does
    not pack every host on the head: Ray's SPREAD, and a soft affinity, left both hosts of
    a two-node cluster on one node for actors that ask for no CPU (measured). Hard: when
    the node is lost the host cannot restart there and dies, and the keeper recreates it
    on the nodes alive then."""
    if len(nodes) < 2:
        return "DEFAULT"
    return NodeAffinitySchedulingStrategy(node_id=nodes[index % len(nodes)], soft=False)


def owned_hosts(url: str, settings: EngineSettings, count: int) -> list[Any]:
    """The owner's route hosts, ready: those a previous owner left running are kept when
    they write with these settings, else replaced."""
    prefix, nodes = settings.key_prefix, alive_nodes()
    return _kept_or_replaced(
        lambda index: create_host(prefix, index, url, settings, nodes),
        lambda index: host_name(prefix, index), settings, count,
    )  # fmt: skip


def create_circuit_host(  # noqa: PLR0917 - the host's whole placement
    prefix: str, index: int, url: str, settings: EngineSettings, route_hosts: int,
    virtual_nodes: int, nodes: Sequence[str],
) -> Any:  # fmt: skip
    """The named, detached circuit host `index` (found when it exists), placed as the
    route hosts are; it releases routes onto `route_hosts` hosts of `virtual_nodes` points."""
    return RemoteCircuitHost.options(
        name=circuit_host_name(prefix, index), namespace=NAMESPACE, get_if_exists=True,
        num_cpus=0, lifetime="detached", scheduling_strategy=spread(index, nodes),
    ).remote(
        index, url, settings, route_hosts=route_hosts, virtual_nodes=virtual_nodes
    )  # fmt: skip


def owned_circuit_hosts(
    url: str, settings: EngineSettings, route_hosts: int, virtual_nodes: int
) -> list[Any]:
    """The owner's circuit hosts, ready (kept or replaced as the route hosts are)."""
    prefix, nodes = settings.key_prefix, alive_nodes()
    return _kept_or_replaced(
        lambda i: create_circuit_host(prefix, i, url, settings, route_hosts, virtual_nodes, nodes),
        lambda index: circuit_host_name(prefix, index), settings, settings.circuit_hosts,
    )  # fmt: skip


def _kept_or_replaced(
    create: Callable[[int], Any], name: Callable[[int], str], settings: EngineSettings, count: int
) -> list[Any]:
    hosts = [create(index) for index in range(count)]
    wanted = (settings.public(), settings.key_digest())
    for index, found in enumerate(ray.get([host.settings_digest.remote() for host in hosts])):
        if tuple(found) != wanted:
            log.warning("%s ran with other settings: replaced", name(index))
            ray.kill(hosts[index], no_restart=True)
            wait_gone(name(index))
            hosts[index] = create(index)
    ray.get([host.ready.remote() for host in hosts])
    return hosts


def actor_alive(name: str) -> bool:
    try:
        ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def host_alive(prefix: str, index: int) -> bool:
    return actor_alive(host_name(prefix, index))


def host_resolver(prefix: str, hosts: list[Any], index: int) -> Callable[[], Any]:
    """What a route handle asks when its host died: host `index` as the owner keeps it
    now (remembered in `hosts`); raises ValueError while it is gone."""

    def current_host() -> Any:
        host = ray.get_actor(host_name(prefix, index), namespace=NAMESPACE)
        if index < len(hosts):
            hosts[index] = host
        return host

    return current_host


def recreate_vanished(
    url: str, settings: EngineSettings, hosts: list[Any], circuit_hosts: list[Any],
    virtual_nodes: int,
) -> bool:  # fmt: skip
    """The keeper's healing: every circuit host, then every route host, that vanished is
    created again (in place in `hosts` / `circuit_hosts`) and waited ready. True when a
    route host was recreated (its dispatches need reconciling)."""
    prefix = settings.key_prefix
    lost = [i for i in range(len(circuit_hosts)) if not actor_alive(circuit_host_name(prefix, i))]
    vanished = [i for i in range(len(hosts)) if not host_alive(prefix, i)]
    nodes = alive_nodes() if lost or vanished else []
    for index in lost:
        log.warning("circuit host %s vanished: recreating it", index)
        host = create_circuit_host(prefix, index, url, settings, len(hosts), virtual_nodes, nodes)
        ray.get(host.ready.remote())
        circuit_hosts[index] = host
    for index in vanished:
        log.warning("route host %s vanished: recreating it", index)
        host = create_host(prefix, index, url, settings, nodes)
        ray.get(host.ready.remote())
        hosts[index] = host
    return bool(vanished)


def stop_hosts(prefix: str, hosts: Sequence[Any], circuit_hosts: Sequence[Any]) -> None:
    """Kill the installation's hosts (route hosts first: they call the circuit hosts) and
    wait until their names are free."""
    for host in (*hosts, *circuit_hosts):
        ray.kill(host, no_restart=True)
    for index in range(len(hosts)):
        wait_host_gone(prefix, index)
    for index in range(len(circuit_hosts)):
        wait_gone(circuit_host_name(prefix, index))


def wait_host_gone(prefix: str, index: int, timeout_s: float = HOST_STOP_TIMEOUT_S) -> None:
    wait_gone(host_name(prefix, index), timeout_s)


def wait_gone(name: str, timeout_s: float = HOST_STOP_TIMEOUT_S) -> None:
    """ray.kill returns before the actor is gone; wait until its name is free."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and actor_alive(name):
        time.sleep(HOST_STOP_POLL_S)


# -- the keeper ------------------------------------------------------------------------------


class Keeper:
    """The owner's background thread: every `every_s` it renews the owner lease (`renew`
    answers False when the lease was lost) and runs `heal`. Errors are logged, never
    raised: the next round tries again. `rounds` counts the rounds done (tests wait on it
    with `wait_rounds`)."""

    def __init__(
        self, renew: Callable[[], bool], heal: Callable[[], None], *, every_s: float = KEEP_EVERY_S
    ) -> None:
        self._renew = renew
        self._heal = heal
        self.every_s = every_s
        self.rounds = 0
        self._stop = threading.Event()
        self._done = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="recovery-keeper", daemon=True)

    def start(self) -> Keeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=HOST_STOP_TIMEOUT_S)

    def wait_rounds(self, count: int, timeout_s: float) -> bool:
        """Wait until `count` rounds have run (True), or `timeout_s` passed (False)."""
        with self._done:
            return self._done.wait_for(lambda: self.rounds >= count, timeout=timeout_s)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.round()

    def round(self) -> None:
        try:
            if not self._renew():
                log.error("the installation's owner lease was lost; claiming it again")
            self._heal()
        except Exception as error:  # a keeper that dies would leave the hosts unhealed
            log.error("installation keeper round failed: %s", error_report(error))
        with self._done:
            self.rounds += 1
            self._done.notify_all()
