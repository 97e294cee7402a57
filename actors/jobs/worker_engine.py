"""The engine of an rq worker process: every transition a job causes goes through it.

rq runs a job as a plain function in the worker's main thread, so the worker keeps one
asyncio event loop in a daemon thread for its whole life, and on it one RouteStore, one
CircuitStore and their circuit effects per Redis URL and key prefix: the same batch
runner a route host writes through (actors/engine/batch.py), with its route locks and one
clock, built from the settings the runtime handed the worker (actors/engine/settings.py).
A job calls in with `engine.run(...)` and blocks until its coroutine is done. Within the
worker a route's transitions are serial under its lock; against a host or another worker
the Lua fence decides.

Jobs tell the host: a transition a job writes that leaves a route waiting (a NotDispatched
waiting for its redelivery, a backstop firing into a re-park) is announced on the owning
host's wake stream (`keys.host_wakes(host)`), which the host follows to arm its precise
timer; the durable backstop stays the fallback. A dispatch the job delivered for a route
with a task is announced there too (`announce_delivered`): the owning host's session guard
takes it as the session's accepted prompt (actors/engine/notice_lifecycle.py). What a
dispatcher call observed (the webhook's status and latency) is announced there too
(`announce_dispatched`): the host exports it as metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from typing import Any, Final, TypeVar

from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.clock import Clock, SystemClock
from actors.engine.circuit_effects import CircuitEffects
from actors.engine.notice_lifecycle import RouteNotices
from actors.engine.notice_setup import route_notices
from actors.engine.requests import Outcome
from actors.engine.route_locks import RouteLocks
from actors.engine.service import RouteService
from actors.engine.settings import EngineSettings
from actors.errors import RecoveryError, error_text
from actors.keys import AttemptFence, KeySpace
from actors.routes.commands import RouteCommand
from actors.routes.models import WAITING_STATES, RouteSnapshot
from actors.store.circuit_store import CircuitStore
from actors.store.pool import bounded_client, connection_url
from actors.store.route_store import RouteStore
from actors.store.wakes import (
    Dispatched,
    announce_delivered,
    announce_dispatched,
    announce_waits,
)

STORE_CONNECTIONS: Final = 4
WAKES_MAXLEN: Final = 10_000
WAKE_TIMEOUT_S: Final = 5.0

T = TypeVar("T")

log = logging.getLogger(__name__)


class WorkerEngine:
    """The engine of one worker process for one Redis and key prefix."""

    def __init__(self, url: str, settings: EngineSettings, *, clock: Clock | None = None) -> None:
        self.settings = settings
        self.keys = settings.keys
        self.clock = clock or SystemClock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="recovery-engine", daemon=True
        )
        self._thread.start()
        self._services: dict[str | None, RouteService] = {}
        self._locks = RouteLocks()
        self.store, self.effects, self._wakes = self.run(self._open(url))
        # The transitions jobs write follow the same notice rules as the hosts' (built on
        # the engine's loop: the session guards' fences are its timers).
        self.notices, self._transcript = self.run(self._open_notices(url))

    async def _open(self, url: str) -> tuple[RouteStore, CircuitEffects, Redis]:
        wakes = bounded_client(url, max_connections=1, timeout_s=WAKE_TIMEOUT_S)
        store = RouteStore.connect(
            url, clock=self.clock, keys=self.keys, max_connections=STORE_CONNECTIONS,
            events_maxlen=self.settings.events_maxlen,
        )  # fmt: skip
        binding = self.settings.circuit_binding()
        circuits = CircuitStore.connect(
            url, keys=self.keys, settings=binding.settings, max_connections=STORE_CONNECTIONS,
            events_maxlen=self.settings.events_maxlen,
        )  # fmt: skip
        return store, CircuitEffects(circuits, binding), wakes

    async def _open_notices(self, url: str) -> tuple[RouteNotices, Redis]:
        return route_notices(url, self.settings, self.store, self.clock, owns_sessions=False)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the engine's loop; its result, or its exception raised."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def service(self, host_id: str | None) -> RouteService:
        """The route service writing for host `host_id`'s routes (its index, its TTLs)."""
        found = self._services.get(host_id)
        if found is None:
            found = self._services[host_id] = RouteService(
                self.store, self.clock, settings=self.settings.route_settings(host_id),
                circuits=self.effects, locks=self._locks, notices=self.notices,
            )  # fmt: skip
        return found

    def commands(
        self, host_id: str | None, items: Sequence[tuple[str, RouteCommand]]
    ) -> list[Outcome]:
        """Run `items` as one batch for host `host_id`, then wake the host for every route
        they left waiting."""
        return self.run(self._commands(host_id, items))

    async def _commands(
        self, host_id: str | None, items: Sequence[tuple[str, RouteCommand]]
    ) -> list[Outcome]:
        outcomes = await self.service(host_id).run_many(items)
        if host_id is not None:
            await self._wake(host_id, [o for o in outcomes if isinstance(o, RouteSnapshot)])
        return outcomes

    async def _wake(self, host_id: str, snapshots: Sequence[RouteSnapshot]) -> None:
        waiting = [s for s in snapshots if s.state in WAITING_STATES and s.deadline is not None]
        if not waiting:
            return
        try:
            await announce_waits(self._wakes, self.keys, host_id, waiting, maxlen=WAKES_MAXLEN)
        except RecoveryError:  # the host's rehydration and the backstop still fire them
            return

    def announce_delivered(
        self, host_id: str | None, attempt: AttemptFence, task_id: str | None
    ) -> None:
        """The dispatch of `attempt` was delivered (its ledger says so): tell its owning
        host `host_id`, whose session guard takes it as the session's accepted prompt.
        Only a route with a task (`task_id`) has notices; with no host known (a dispatch
        reconciliation enqueued) nobody is told. A Redis error is logged: the host's guard
        still holds the attempt's retry, which the attempt's report ends as before."""
        if host_id is None or task_id is None:
            return
        try:
            self.run(
                announce_delivered(self._wakes, self.keys, host_id, [attempt], maxlen=WAKES_MAXLEN)
            )
        except RecoveryError as error:
            log.warning("delivery of %s not announced: %s", attempt, error_text(error))

    def announce_dispatched(self, host_id: str | None, call: Dispatched) -> None:
        """Tell the owning host `host_id` what a dispatcher call observed (its metrics; the
        ledger has the same facts). With no host known nobody is told; a Redis error is
        logged and loses that sample only."""
        if host_id is None:
            return
        try:
            self.run(
                announce_dispatched(self._wakes, self.keys, host_id, [call], maxlen=WAKES_MAXLEN)
            )
        except RecoveryError as error:
            log.warning("dispatch of %s not announced: %s", call.fence, error_text(error))

    def abandon_unsent(self, snapshot: RouteSnapshot) -> None:
        self.run(self.effects.abandon_unsent(snapshot, self.clock.now()))

    def close(self) -> None:
        async def closing() -> None:
            await self.store.aclose()
            await self.effects.circuits.aclose()
            await self._wakes.aclose()
            await self._transcript.aclose()

        self.run(closing())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


_engines: dict[tuple[str, str, Clock | None], WorkerEngine] = {}
_engines_lock = threading.Lock()


def worker_engine(
    connection: SyncRedis, keys: KeySpace, *, clock: Clock | None = None
) -> WorkerEngine:
    """This process's engine for the Redis `connection` talks to and the key prefix of
    `keys`, created on first use with the settings in this process's environment. A
    `clock` (a test's) gets an engine of its own reading that clock."""
    url = connection_url(connection)
    with _engines_lock:
        found = _engines.get((url, keys.prefix, clock))
        if found is None:
            settings = replace(EngineSettings.from_environment(os.environ), key_prefix=keys.prefix)
            engine = WorkerEngine(url, settings, clock=clock)
            found = _engines[(url, keys.prefix, clock)] = engine
        return found


def close_engines() -> None:
    """Close every engine of this process (tests; a worker's exit ends them anyway)."""
    with _engines_lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        try:
            engine.close()
        except (RedisError, RecoveryError, RuntimeError):
            continue
