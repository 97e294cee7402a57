"""`RecoveryRuntime`: starts or joins one installation, hands out `RouteHandle`s.

    runtime = RecoveryRuntime(host_count=2).start()   # or RecoveryRuntime.attach()
    snapshot = await runtime.route("session-42").start(profile, caller="kanban", ...)
    await runtime.profiles.create("fleet", document)       # a stored profile, versioned
    runtime.shutdown()

Ray: `ray_address`, else `RAY_ADDRESS`, else the installation's recorded address, else a
local Ray bound to `ray_host` (loopback by default; actors/hosting/ray_connect.py). Redis:
`redis_url`, else `REDIS_URL`, else the embedded Redis of `data_dir`, started or
reattached to (one server per folder, actors/store/embedded.py). The first runtime of a
key prefix owns the installation; the others attach and read its host ring, so every
process sends a route to the host the ring picks (actors/hosting/installation.py).
`from_config(load_config(...))` takes every setting from the environment and a TOML file.

Dispatch: with a `dispatcher` ("module:callable", or "webhook") the hosts enqueue a job
when a route becomes `retrying`; the owner runs `worker_count` supervised rq workers (0:
`recovery workers` elsewhere; actors/jobs/workers.py) with `worker_paths` importable; a
dead worker's started dispatches are reconciled and it is replaced. Handles send through
one HostBatcher per host (concurrent calls share one Ray call; a retried call whose first
attempt committed comes back rejected by the fence: `committed_by_retry`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Self

import ray
import redis

from actors.engine.config import DEFAULT_DATA_DIR, DEFAULT_WORKER_COUNT, RuntimeConfig
from actors.engine.settings import EngineSettings
from actors.errors import RecoveryError, error_text
from actors.hosting.batcher import BatcherPool
from actors.hosting.handle import RouteHandle, committed_by_retry
from actors.hosting.hash_ring import DEFAULT_VIRTUAL_NODES, HashRing
from actors.hosting.installation import (
    OWNER_TTL_S,
    InstallationMismatchError,
    Keeper,
    RemoteRouteHost,
    embedded_url,
    host_resolver,
    live_record,
    new_record,
    new_token,
    owned_circuit_hosts,
    owned_hosts,
    recreate_vanished,
    refuse_mismatch,
    refuse_ring_change,
    stop_hosts,
)
from actors.hosting.names import NAMESPACE, host_ids, host_name
from actors.hosting.profiles import RuntimeProfiles
from actors.hosting.ray_connect import LOOPBACK, start_ray
from actors.jobs.queue import default_queue_name, dispatch_queue
from actors.jobs.reconcile import ReconcileReport, reconcile
from actors.jobs.worker_engine import WorkerEngine
from actors.jobs.workers import WorkerPool, worker_env
from actors.keys import DEFAULT_PREFIX, KeySpace, valid_route_id
from actors.routes.circuit_board import DEFAULT_PROBE_TTL_S
from actors.routes.commands import RouteSettings
from actors.store.embedded import EmbeddedRedis
from actors.store.installation import (
    InstallationRecord,
    NoInstallationError,
    OwnerLease,
    read_installation,
    recorded_at,
    write_installation,
)
from actors.store.redis_transcript import DEFAULT_TRANSCRIPT_MAXLEN
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN
from circuits import CircuitSettings

__all__ = [
    "NAMESPACE", "InstallationMismatchError", "NoInstallationError", "RecoveryRuntime",
    "RemoteRouteHost", "RouteHandle", "committed_by_retry", "host_name",
]  # fmt: skip

_ROUTE_DEFAULTS: Final = RouteSettings()
_ENGINE_DEFAULTS: Final = EngineSettings()
# The settings value's fields, each a field of the runtime of the same name.
ENGINE_SETTINGS: Final = tuple(item.name for item in fields(EngineSettings))
REDIS_TIMEOUT_S: Final = 5.0

log = logging.getLogger(__name__)


@dataclass
class RecoveryRuntime:
    """The recovery runtime of one installation: its settings, and once `start()`ed, the
    route hosts (Ray actors), Redis (embedded when `redis_url` is None) and, with a
    `dispatcher`, the supervised rq workers that call it. `route(id)` gives the handle an
    orchestrator reports through; `shutdown()` stops what this runtime started. The
    constructor raises ValueError naming a setting out of range (`from_config` goes
    through `load_config`'s checks first)."""

    redis_url: str | None = field(default=None, repr=False)  # it may hold a password
    data_dir: Path | None = None
    ray_address: str | None = None
    host_count: int = 2
    key_prefix: str = DEFAULT_PREFIX
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES
    dispatcher: str | None = None
    worker_count: int = DEFAULT_WORKER_COUNT
    queue_name: str | None = None
    worker_paths: tuple[str, ...] = ()
    events_maxlen: int = DEFAULT_EVENTS_MAXLEN
    closed_ttl_s: int = _ROUTE_DEFAULTS.closed_ttl_s
    utility_ttl_s: int = _ROUTE_DEFAULTS.utility_ttl_s
    ray_cpus: int | None = None  # only for a local Ray this runtime starts
    ray_dashboard: bool | None = None  # likewise; None: Ray's own default
    ray_host: str = LOOPBACK  # likewise: the interface its node and dashboard bind to
    # Circuits: the installation key (None: $RECOVERY_INSTALLATION_KEY, else built in; every
    # host and worker must share it), thresholds and timings, the probe lease's TTL.
    installation_key: str | None = field(default=None, repr=False)
    circuit_settings: CircuitSettings = field(default_factory=CircuitSettings)
    probe_ttl_s: float = DEFAULT_PROBE_TTL_S
    dispatch_timeout_s: float = _ENGINE_DEFAULTS.dispatch_timeout_s  # a dispatcher's call
    circuit_hosts: int = _ENGINE_DEFAULTS.circuit_hosts  # circuit host actors (0: none)
    # Transcript notices: `module:factory` of a TranscriptPort / an Authoriser (None: the
    # Redis transcript / the task recorded at start), the transcript stream's MAXLEN.
    transcript: str | None = None
    authoriser: str | None = None
    transcript_maxlen: int = DEFAULT_TRANSCRIPT_MAXLEN
    webhook_url: str | None = None  # with dispatcher "webhook" (actors/jobs/webhook.py)
    webhook_timeout_s: float = _ENGINE_DEFAULTS.webhook_timeout_s
    webhook_secret: str | None = field(default=None, repr=False)
    dashboard_url: str | None = field(default=None, init=False, repr=False)
    hosts: list[Any] = field(default_factory=list, init=False, repr=False)
    circuit_host_handles: list[Any] = field(default_factory=list, init=False, repr=False)
    _ring: HashRing | None = field(default=None, init=False, repr=False)
    _embedded: EmbeddedRedis | None = field(default=None, init=False, repr=False)
    _started_ray: bool = field(default=False, init=False, repr=False)
    _url: str | None = field(default=None, init=False, repr=False)
    _batchers: BatcherPool = field(default_factory=BatcherPool, init=False, repr=False)
    workers: WorkerPool | None = field(default=None, init=False, repr=False)
    _lease: OwnerLease | None = field(default=None, init=False, repr=False)
    _keeper: Keeper | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.host_count < 1:
            raise ValueError(f"host_count must be >= 1, got {self.host_count}")
        if self.worker_count < 0:
            raise ValueError(f"worker_count must be >= 0, got {self.worker_count}")
        if self.queue_name is None:
            self.queue_name = default_queue_name(self.key_prefix)
        self.settings  # noqa: B018 - builds (so validates) the settings value now

    @property
    def settings(self) -> EngineSettings:
        """The one settings value every host and worker of this runtime writes with (its
        fields are this runtime's fields of the same names: built here, nowhere else)."""
        return EngineSettings(**{name: getattr(self, name) for name in ENGINE_SETTINGS})

    @classmethod
    def with_settings(cls, settings: EngineSettings, **options: Any) -> Self:
        """A runtime (not started yet) writing with `settings`; `options` are its other
        fields (Redis, Ray, hosts, workers)."""
        return cls(**{name: getattr(settings, name) for name in ENGINE_SETTINGS}, **options)

    @classmethod
    def from_config(cls, config: RuntimeConfig) -> Self:
        """A runtime (not started yet) with every setting of `config` (actors/engine/config.py)."""
        return cls.with_settings(
            config.engine_settings(), redis_url=config.redis_url, data_dir=config.data_dir,
            ray_address=config.ray_address, host_count=config.hosts,
            worker_count=config.workers, worker_paths=config.worker_paths,
            ray_cpus=config.ray_cpus, ray_dashboard=config.ray_dashboard,
            ray_host=config.ray_host,
        )  # fmt: skip

    @property
    def queue(self) -> str:
        """The name of the rq queue dispatch jobs go to."""
        assert self.queue_name is not None  # set in __post_init__
        return self.queue_name

    @property
    def url(self) -> str:
        """The Redis URL in use (for an embedded Redis, its unix socket)."""
        if self._url is None:
            raise RuntimeError("the runtime is not started")
        return self._url

    @property
    def owner(self) -> bool:
        """Whether this runtime owns the installation (it created the hosts and is the only
        one to stop them) rather than being attached to it."""
        return self._lease is not None

    def start(self) -> Self:
        """Start or join the installation under the key prefix; returns the runtime.

        With no live owner it becomes the owner: it connects to or starts Ray and Redis,
        creates (or keeps) the hosts, records the installation and keeps it. With a live
        owner it attaches if every setting equals the installation's, else raises
        InstallationMismatchError naming the first that differs. Raises what Ray raises
        when it cannot start or connect, and Redis errors when Redis is unreachable."""
        self._url = self._start_redis()
        connection = self._redis()
        keys = KeySpace(self.key_prefix)
        lease = OwnerLease(connection, keys, new_token(), ttl_s=OWNER_TTL_S)
        record = None if lease.claim() else live_record(connection, keys, lease)
        if record is not None:
            refuse_mismatch(record, self.host_count, self.virtual_nodes, self.settings)
            self._join(record)
            return self
        try:
            self._own(connection, keys, lease)
        except BaseException:
            lease.release()
            raise
        return self

    @classmethod
    def attach(
        cls,
        *,
        redis_url: str | None = None,
        key_prefix: str = DEFAULT_PREFIX,
        data_dir: Path | None = None,
        installation_key: str | None = None,
    ) -> Self:
        """Join the installation under `key_prefix` without creating hosts or imposing
        settings (Redis: `redis_url`, else REDIS_URL, else the embedded one of `data_dir`);
        its `shutdown()` leaves the hosts serving. Raises NoInstallationError when nothing
        is recorded there, CorruptInstallationError for an unreadable record."""
        url = redis_url or os.environ.get("REDIS_URL") or embedded_url(data_dir)
        record = recorded_at(url, KeySpace(key_prefix))
        runtime = cls.with_settings(
            EngineSettings.from_public(record.settings, installation_key), redis_url=url,
            host_count=record.host_count, virtual_nodes=record.virtual_nodes,
        )  # fmt: skip
        runtime._url = url
        runtime._join(record)
        return runtime

    def _own(self, connection: redis.Redis, keys: KeySpace, lease: OwnerLease) -> None:
        recorded = read_installation(connection, keys)
        if recorded is not None:  # the ring outlives its owners: routes are indexed by host
            refuse_ring_change(recorded, self.host_count, self.virtual_nodes)
        self._start_ray(self.ray_address)
        settings = self.settings
        self.circuit_host_handles = owned_circuit_hosts(
            self.url, settings, self.host_count, self.virtual_nodes
        )
        self.hosts = owned_hosts(self.url, settings, self.host_count)
        self._ring = HashRing(host_ids(self.host_count), virtual_nodes=self.virtual_nodes)
        record = new_record(settings, self.host_count, self.virtual_nodes, owner=lease.token)
        write_installation(connection, keys, record)
        self._lease = lease
        if self.dispatcher is not None and self.worker_count > 0:
            self.workers = WorkerPool(
                self.url, self.queue, count=self.worker_count,
                name_prefix=f"{self.key_prefix}-worker", env=self._worker_env(),
                on_death=self._worker_died,
            ).start()  # fmt: skip
        self._keeper = Keeper(lambda: lease.renew() or lease.claim(), self._heal).start()

    def _join(self, record: InstallationRecord) -> None:
        self._start_ray(self.ray_address or record.ray_address)
        self.hosts = [ray.get_actor(name, namespace=NAMESPACE) for name in record.host_names]
        self.circuit_host_handles = [
            ray.get_actor(name, namespace=NAMESPACE) for name in record.circuit_host_names
        ]
        self._ring = HashRing(host_ids(record.host_count), virtual_nodes=record.virtual_nodes)

    def _heal(self) -> None:
        """The keeper's round: recreate every host that vanished, then reconcile."""
        vanished = recreate_vanished(
            self.url, self.settings, self.hosts, self.circuit_host_handles, self.virtual_nodes
        )
        if vanished and self.dispatcher is not None:
            log.warning("after recreating route hosts, reconciliation: %s", self.reconcile())

    def _worker_env(self) -> dict[str, str]:
        """The workers' environment: importable paths, and the settings value their jobs
        write with (the hosts'; it holds the installation key, so never on a command line)."""
        return {**worker_env(self.worker_paths), **self.settings.to_environment()}

    def reconcile(self) -> ReconcileReport:
        """One reconciliation pass over the pending dispatches (actors/jobs/dispatch.py)."""
        if self.dispatcher is None:
            raise RuntimeError("the runtime has no dispatcher to reconcile with")
        connection = redis.Redis.from_url(self.url)
        engine = WorkerEngine(self.url, self.settings)  # the transitions the hosts would write
        try:
            queue = dispatch_queue(connection, self.queue)
            return reconcile(
                queue, engine.keys, self.dispatcher, now=datetime.now(UTC), engine=engine,
                dispatch_timeout_s=self.dispatch_timeout_s,
            )  # fmt: skip
        finally:
            engine.close()
            connection.close()

    def _worker_died(self, name: str) -> None:
        report = self.reconcile()
        log.warning("after rq worker %s died, reconciliation: %s", name, report)

    def host_index(self, route_id: str) -> int:
        if self._ring is None:
            raise RuntimeError("the runtime is not started")
        owner = self._ring.node_for(valid_route_id(route_id))
        return self._ring.nodes.index(owner)

    def route(self, route_id: str) -> RouteHandle:
        """The handle of route `route_id` (the orchestrator's own session id), bound to
        the host that owns it. Raises InvalidRouteIdError for an id outside
        `[A-Za-z0-9._-]{1,128}`, RuntimeError before `start()`."""
        index = self.host_index(route_id)
        resolve = host_resolver(self.key_prefix, self.hosts, index)
        return RouteHandle(route_id, self.hosts[index], self._batchers, resolve)

    @property
    def profiles(self) -> RuntimeProfiles:
        """The installation's profile store: create, update, get, list, delete, its edits
        authorised (actors/hosting/profiles.py). RuntimeError before `start()`."""
        return RuntimeProfiles(self.url, self.settings)

    def shutdown(self) -> int | None:
        """The owner kills the hosts (their schedules stay in Redis) after stopping its rq
        workers, and gives the installation up; an attached runtime only lets go of them.
        Either stops the embedded Redis and the Ray it started itself. Returns how many
        schedules were left pending in Redis (None when it could not be read)."""
        if self._keeper is not None:
            self._keeper.stop()
            self._keeper = None
        if self.workers is not None:
            self.workers.stop()
            self.workers = None
        if self._lease is not None:
            stop_hosts(self.key_prefix, self.hosts, self.circuit_host_handles)
            self._release_lease()
        self.hosts = []
        self.circuit_host_handles = []
        self._ring = None
        self._batchers.clear()
        left = self._left_pending()
        if self._embedded is not None:
            self._embedded.stop()
            self._embedded = None
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
        return left

    def _release_lease(self) -> None:
        lease, self._lease = self._lease, None
        try:
            if lease is not None:
                lease.release()
        except RecoveryError as error:  # it lapses by its TTL anyway
            log.warning("cannot give the installation up: %s", error)

    def pending_schedules(self) -> int:
        """How many schedules are pending in Redis now (the schedules sorted set)."""
        connection = self._redis()
        try:
            return int(connection.zcard(KeySpace(self.key_prefix).schedules))
        finally:
            connection.close()

    def _left_pending(self) -> int | None:
        if self._url is None:
            return None
        try:
            return self.pending_schedules()
        except redis.RedisError as error:
            log.warning("cannot count the pending schedules: %s", error_text(error))
            return None

    def _start_ray(self, address: str | None) -> None:
        connected = start_ray(
            address, namespace=NAMESPACE, cpus=self.ray_cpus, dashboard=self.ray_dashboard,
            bind_host=self.ray_host,
        )  # fmt: skip
        self._started_ray = self._started_ray or connected.started
        self.dashboard_url = connected.dashboard_url or self.dashboard_url

    def _redis(self) -> redis.Redis:
        return redis.Redis.from_url(
            self.url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
        )

    def _start_redis(self) -> str:
        url = self.redis_url or os.environ.get("REDIS_URL")
        if url:
            return url
        folder = self.data_dir or Path(os.environ.get("RECOVERY_DATA_DIR", DEFAULT_DATA_DIR))
        self._embedded = EmbeddedRedis(folder.expanduser())
        return self._embedded.start()
