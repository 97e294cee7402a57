"""`RecoveryRuntime`: connects to (or starts) Ray and Redis, runs the route host pool,
and hands out `RouteHandle`s.

    runtime = RecoveryRuntime(host_count=2).start()
    route = runtime.route("session-42")
    snapshot = await route.start(profile, caller="kanban", invocation_id="inv-1")
    ...
    runtime.shutdown()

Ray: `ray_address`, else `RAY_ADDRESS`, else a local Ray (`ray.init(address="local")`) —
and only if Ray is not initialised in this process already. Redis: `redis_url`, else
`REDIS_URL`, else an embedded Redis with its data in `data_dir` (default
`RECOVERY_DATA_DIR` or ~/.local/state/provider-recovery). The hosts are named actors in
one Ray namespace (names derived from the key prefix), so a second runtime on the same
cluster and prefix finds and shares them. `RecoveryRuntime.from_config(load_config(...))`
takes every setting from the environment and a TOML file (actors/engine/config.py), including
retention: `events_maxlen` for the events stream, `closed_ttl_s` / `utility_ttl_s` for
the expiry of closed and utility routes; `ray_cpus` / `ray_dashboard` apply only to a
local Ray this runtime starts (`dashboard_url` is set when it has a dashboard).
A route belongs to the host a consistent hash ring (actors/hosting/hash_ring.py) picks for its
id; every process agrees on it.

Dispatch: with `dispatcher="module:callable"` the hosts enqueue a dispatch job whenever
a route becomes `retrying`, and the runtime runs `worker_count` supervised rq worker
processes on the dispatch queue (`queue_name`, default `<key prefix>-dispatch`;
actors/jobs/workers.py); `worker_paths` are added to the workers' import path (where the
dispatcher lives, if not installed). A worker found dead is forgotten by rq, the pending
dispatches are reconciled (its started ones become `action_required`) and it is replaced.
`shutdown()` stops the workers before the hosts and Redis.

Route handles (actors/hosting/handle.py) send their calls through one HostBatcher per
host (actors/hosting/batcher.py): concurrent calls share one Ray call per host. Hosts run
with `max_task_retries=-1`; a retried call whose first attempt committed comes back
rejected by the fence (see `committed_by_retry`).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Self

import ray
import redis

from actors.engine.config import DEFAULT_DATA_DIR, DEFAULT_WORKER_COUNT, RuntimeConfig
from actors.engine.settings import EngineSettings
from actors.errors import error_text
from actors.hosting.batcher import BatcherPool
from actors.hosting.handle import RouteHandle, committed_by_retry
from actors.hosting.hash_ring import DEFAULT_VIRTUAL_NODES, HashRing
from actors.hosting.route_host import RouteHost
from actors.jobs.queue import default_queue_name, dispatch_queue
from actors.jobs.reconcile import ReconcileReport, reconcile
from actors.jobs.worker_engine import WorkerEngine
from actors.jobs.workers import WorkerPool, worker_env
from actors.keys import DEFAULT_PREFIX, KeySpace, valid_route_id
from actors.routes.circuit_board import DEFAULT_PROBE_TTL_S
from actors.routes.commands import RouteSettings
from actors.store.embedded import EmbeddedRedis
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN
from circuits import CircuitSettings

__all__ = ["NAMESPACE", "RecoveryRuntime", "RouteHandle", "committed_by_retry", "host_name"]

NAMESPACE: Final = "provider-recovery"
_ROUTE_DEFAULTS: Final = RouteSettings()
HOST_STOP_TIMEOUT_S: Final = 30.0
HOST_STOP_POLL_S: Final = 0.05
REDIS_TIMEOUT_S: Final = 5.0

log = logging.getLogger(__name__)

RemoteRouteHost = ray.remote(max_restarts=-1, max_task_retries=-1)(RouteHost)


def host_name(prefix: str, index: int) -> str:
    return f"route-host:{prefix}:{index}"


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
    # Circuits: the installation key (None: $RECOVERY_INSTALLATION_KEY, else the built-in
    # one), thresholds and timings, the probe lease's TTL; the hosts and the dispatch
    # workers use the same key, or they would see different circuits.
    installation_key: str | None = field(default=None, repr=False)
    circuit_settings: CircuitSettings = field(default_factory=CircuitSettings)
    probe_ttl_s: float = DEFAULT_PROBE_TTL_S
    dashboard_url: str | None = field(default=None, init=False, repr=False)
    hosts: list[Any] = field(default_factory=list, init=False, repr=False)
    _ring: HashRing | None = field(default=None, init=False, repr=False)
    _embedded: EmbeddedRedis | None = field(default=None, init=False, repr=False)
    _started_ray: bool = field(default=False, init=False, repr=False)
    _url: str | None = field(default=None, init=False, repr=False)
    _batchers: BatcherPool = field(default_factory=BatcherPool, init=False, repr=False)
    workers: WorkerPool | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.host_count < 1:
            raise ValueError(f"host_count must be >= 1, got {self.host_count}")
        if self.worker_count < 1:
            raise ValueError(f"worker_count must be >= 1, got {self.worker_count}")
        if self.queue_name is None:
            self.queue_name = default_queue_name(self.key_prefix)
        self.settings  # noqa: B018 - builds (so validates) the settings value now

    @property
    def settings(self) -> EngineSettings:
        """The one settings value every host and worker of this runtime writes with."""
        return EngineSettings(
            key_prefix=self.key_prefix, closed_ttl_s=self.closed_ttl_s,
            utility_ttl_s=self.utility_ttl_s, events_maxlen=self.events_maxlen,
            circuit_settings=self.circuit_settings, probe_ttl_s=self.probe_ttl_s,
            installation_key=self.installation_key, dispatcher=self.dispatcher,
            queue_name=self.queue_name,
        )  # fmt: skip

    @classmethod
    def from_config(cls, config: RuntimeConfig) -> Self:
        """A runtime (not started yet) with every setting of `config` (actors/engine/config.py)."""
        return cls(
            redis_url=config.redis_url, data_dir=config.data_dir,
            ray_address=config.ray_address, host_count=config.hosts,
            key_prefix=config.key_prefix, dispatcher=config.dispatcher,
            worker_count=config.workers, queue_name=config.queue,
            worker_paths=config.worker_paths, events_maxlen=config.events_maxlen,
            closed_ttl_s=config.closed_ttl_s, utility_ttl_s=config.utility_ttl_s,
            ray_cpus=config.ray_cpus, ray_dashboard=config.ray_dashboard,
            installation_key=config.installation_key,
            circuit_settings=config.circuit_settings(), probe_ttl_s=config.circuit_probe_ttl_s,
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

    def start(self) -> Self:
        """Connect to or start Ray and Redis, create or find the hosts, and wait until
        each has rehydrated its schedules; returns the runtime. Raises what Ray raises
        when it cannot start or connect, and redis-py's errors when Redis is unreachable."""
        self._start_ray()
        self._url = self._start_redis()
        host_ids = [f"host-{index}" for index in range(self.host_count)]
        settings = self.settings
        self.hosts = [
            RemoteRouteHost.options(
                name=host_name(self.key_prefix, index), namespace=NAMESPACE,
                get_if_exists=True, num_cpus=0, lifetime="detached",
            ).remote(host_id, self._url, settings)
            for index, host_id in enumerate(host_ids)
        ]  # fmt: skip
        self._ring = HashRing(host_ids, virtual_nodes=self.virtual_nodes)
        ray.get([host.ready.remote() for host in self.hosts])
        if self.dispatcher is not None:
            self.workers = WorkerPool(
                self._url, self.queue, count=self.worker_count,
                name_prefix=f"{self.key_prefix}-worker", env=self._worker_env(),
                on_death=self._worker_died,
            ).start()  # fmt: skip
        return self

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
            keys = KeySpace(self.key_prefix)
            return reconcile(queue, keys, self.dispatcher, now=_utcnow(), engine=engine)
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
        return RouteHandle(route_id, self.hosts[self.host_index(route_id)], self._batchers)

    def shutdown(self) -> int | None:
        """Kill the hosts (their schedules stay in Redis), stop the embedded Redis this
        runtime started, and Ray if this runtime started it. The rq workers stop first.
        Returns how many schedules were left pending in Redis, counted once the hosts are
        gone (None when the runtime never had a Redis or it could not be read)."""
        if self.workers is not None:
            self.workers.stop()
            self.workers = None
        for host in self.hosts:
            ray.kill(host, no_restart=True)
        self._wait_hosts_gone()
        self.hosts = []
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

    def pending_schedules(self) -> int:
        """How many schedules are pending in Redis now (the schedules sorted set)."""
        connection = redis.Redis.from_url(
            self.url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
        )
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

    def _start_ray(self) -> None:
        if ray.is_initialized():
            return
        address = self.ray_address or os.environ.get("RAY_ADDRESS")
        local: dict[str, Any] = {}  # options Ray accepts only when it starts a new cluster
        if address in (None, "local"):
            local = {"num_cpus": self.ray_cpus, "include_dashboard": self.ray_dashboard}
        context = ray.init(address=address or "local", namespace=NAMESPACE, **local)
        self.dashboard_url = getattr(context, "dashboard_url", None) or None
        self._started_ray = True

    def _start_redis(self) -> str:
        url = self.redis_url or os.environ.get("REDIS_URL")
        if url:
            return url
        folder = self.data_dir or Path(os.environ.get("RECOVERY_DATA_DIR", DEFAULT_DATA_DIR))
        self._embedded = EmbeddedRedis(folder.expanduser())
        return self._embedded.start()

    def _wait_hosts_gone(self) -> None:
        """ray.kill returns before the actor is gone; wait until its name is free."""
        deadline = time.monotonic() + HOST_STOP_TIMEOUT_S
        for index in range(len(self.hosts)):
            while time.monotonic() < deadline:
                try:
                    ray.get_actor(host_name(self.key_prefix, index), namespace=NAMESPACE)
                except ValueError:
                    break
                time.sleep(HOST_STOP_POLL_S)


def _utcnow() -> datetime:
    return datetime.now(UTC)
