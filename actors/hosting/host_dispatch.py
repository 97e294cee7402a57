"""`HostDispatch`: how a route host hands its `retrying` routes to the rq dispatch job.

Enqueueing is rq's sync Python, so it runs on one worker thread of its own: enqueues
never starve the host loop's timers, and they stay in order. It is idempotent (the
attempt's ledger and the job id fence it), so a route enqueued twice runs once. A Redis
error is logged and the route stays `retrying` with no ledger: reconciliation (at every
host start, or `recovery reconcile`) enqueues it then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import redis
from redis.exceptions import RedisError

from actors.clock import Clock
from actors.engine.service import RouteService, ServiceOnLoop
from actors.engine.settings import EngineSettings
from actors.errors import RecoveryError, error_text
from actors.hosting.metrics import RouteMetrics
from actors.jobs.queue import DEFAULT_QUEUE, dispatch_queue, enqueue_dispatch
from actors.jobs.reconcile import ReconcileReport
from actors.jobs.reconcile import reconcile as reconcile_dispatches
from actors.routes.models import RouteSnapshot

log = logging.getLogger(__name__)


class HostDispatch:
    def __init__(
        self,
        host_id: str,
        redis_url: str,
        settings: EngineSettings,
        *,
        clock: Clock,
        metrics: RouteMetrics,
    ) -> None:
        """Dispatches of host `host_id` through `settings.dispatcher` (None: the host
        dispatches nothing)."""
        self.host_id = host_id
        self.dispatcher = settings.dispatcher
        self._settings = settings
        self._queue_name = settings.queue_name or DEFAULT_QUEUE
        self._redis_url = redis_url
        self._clock = clock
        self._metrics = metrics
        self._sync: redis.Redis | None = None  # rq's client, created on first use
        self._enqueuing = ThreadPoolExecutor(1, thread_name_prefix="recovery-enqueue")

    def connection(self) -> redis.Redis:
        """The sync client rq (and the backstop armer) use."""
        if self._sync is None:
            self._sync = redis.Redis.from_url(self._redis_url)
        return self._sync

    async def enqueue(self, snapshots: Sequence[RouteSnapshot]) -> None:
        """Enqueue the dispatch of every route Redis says is `retrying`, off the loop."""
        retrying = [s for s in snapshots if s.state == "retrying"]
        dispatcher = self.dispatcher
        if dispatcher is None or not retrying:
            return
        loop = asyncio.get_running_loop()
        try:
            jobs = await loop.run_in_executor(
                self._enqueuing, lambda: [self._enqueue(s, dispatcher) for s in retrying]
            )
        except (RedisError, RecoveryError) as error:  # reconciliation enqueues them later
            log.warning("dispatch of %d routes not enqueued: %s", len(retrying), error_text(error))
            return
        enqueued = [s for s, job in zip(retrying, jobs, strict=True) if job is not None]
        if enqueued:  # Ray's Counter.inc refuses 0
            self._metrics.dispatches.inc(len(enqueued))
        now = self._clock.now()
        for snapshot in enqueued:
            if snapshot.updated_at is not None:
                self._metrics.dispatch_enqueue.observe((now - snapshot.updated_at).total_seconds())

    def _enqueue(self, snapshot: RouteSnapshot, dispatcher: str) -> str | None:
        queue = dispatch_queue(self.connection(), self._queue_name)
        return enqueue_dispatch(
            queue, self._settings.keys, snapshot.attempt, dispatcher=dispatcher,
            now=self._clock.now(), host_id=self.host_id,
            timeout_s=self._settings.dispatch_timeout_s, redeliveries=snapshot.redeliveries,
        )  # fmt: skip

    def reconcile(
        self, service: RouteService, loop: asyncio.AbstractEventLoop
    ) -> ReconcileReport | None:
        """Reconcile the pending dispatches (None without a dispatcher). Run in a worker
        thread: its route transitions go back to `service` on the host's `loop`."""
        if self.dispatcher is None:
            return None
        queue = dispatch_queue(self.connection(), self._queue_name)
        return reconcile_dispatches(
            queue, self._settings.keys, self.dispatcher, now=self._clock.now(),
            engine=ServiceOnLoop(service, loop),
            dispatch_timeout_s=self._settings.dispatch_timeout_s,
        )  # fmt: skip

    def close(self) -> None:
        self._enqueuing.shutdown(wait=False)
        if self._sync is not None:
            self._sync.close()
