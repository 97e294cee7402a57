"""`HostDispatch`: how a route host hands its `retrying` routes to the rq dispatch job.

Enqueueing is rq's sync Python, so it runs on one worker thread of its own: enqueues
never starve the host loop's timers, and they stay in order. It is idempotent (the
attempt's ledger and the job id fence it), so a route enqueued twice runs once. A route
whose enqueue met a Redis error (Redis restarting between the ledger's `queued` and rq's
job, say) is enqueued again after a backoff doubling up to `RETRY_MAX_S`, until Redis
takes it or the route has left that attempt: reconciliation runs only at a host start, a
worker's death or `recovery reconcile`, so waiting for it could leave the route
`retrying` for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final

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
from actors.routes.models import RouteSnapshot, attempt_retrying
from actors.store.sync_reads import read_route

log = logging.getLogger(__name__)

RETRY_FIRST_S: Final = 0.5
RETRY_MAX_S: Final = 5.0  # an outage's routes are dispatched within this of its end


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
        self._retries: set[asyncio.Task[None]] = set()

    def connection(self) -> redis.Redis:
        """The sync client rq (and the backstop armer) use."""
        if self._sync is None:
            self._sync = redis.Redis.from_url(self._redis_url)
        return self._sync

    async def enqueue(self, snapshots: Sequence[RouteSnapshot]) -> None:
        """Enqueue the dispatch of every route Redis says is `retrying`, off the loop;
        those Redis refused are enqueued again in the background (`_retry`)."""
        retrying = [s for s in snapshots if s.state == "retrying"]
        dispatcher = self.dispatcher
        if dispatcher is None or not retrying:
            return
        failed = await self._enqueued(retrying, dispatcher, still_due=False)
        if failed:
            task = asyncio.create_task(self._retry(failed, dispatcher))
            self._retries.add(task)  # held: the loop keeps only a weak reference
            task.add_done_callback(self._retries.discard)

    async def _retry(self, failed: list[RouteSnapshot], dispatcher: str) -> None:
        """Enqueue `failed` again, backing off, until none is left: a late enqueue is
        harmless (a route gone on from the attempt is dropped; the job is fenced)."""
        delay = RETRY_FIRST_S
        while failed:
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
            failed = await self._enqueued(failed, dispatcher, still_due=True)

    async def _enqueued(
        self, snapshots: list[RouteSnapshot], dispatcher: str, *, still_due: bool
    ) -> list[RouteSnapshot]:
        """Enqueue each route's dispatch in the enqueuing thread (with `still_due`, only
        if the route still holds that attempt); counts those enqueued, returns those a
        Redis error left unsent."""
        loop = asyncio.get_running_loop()
        results = await loop.run_in_executor(
            self._enqueuing, lambda: self._enqueue_all(snapshots, dispatcher, still_due)
        )
        failed = [s for s, r in zip(snapshots, results, strict=True) if isinstance(r, RedisError)]
        if failed:
            log.warning(
                "dispatch of %d routes not enqueued, trying again: %s",
                len(failed), error_text(next(r for r in results if isinstance(r, RedisError))),
            )  # fmt: skip
        self._observed([s for s, r in zip(snapshots, results, strict=True) if isinstance(r, str)])
        return failed

    def _enqueue_all(
        self, snapshots: list[RouteSnapshot], dispatcher: str, still_due: bool
    ) -> list[str | RedisError | None]:
        """`_enqueue_or_error` of each route, up to the first Redis error, which stands for
        the rest: during an outage each would only wait out the same failure."""
        results: list[str | RedisError | None] = []
        for snapshot in snapshots:
            result = self._enqueue_or_error(snapshot, dispatcher, still_due)
            if isinstance(result, RedisError):
                return results + [result] * (len(snapshots) - len(results))
            results.append(result)
        return results

    def _enqueue_or_error(
        self, snapshot: RouteSnapshot, dispatcher: str, still_due: bool
    ) -> str | RedisError | None:
        """The job id, None (nothing to enqueue), or the Redis error to try again after.
        A RecoveryError (a route that cannot be read or enqueued) is logged and dropped:
        trying again would only repeat it."""
        try:
            if still_due and not self._holds_attempt(snapshot):
                return None
            return self._enqueue(snapshot, dispatcher)
        except RedisError as error:
            return error
        except RecoveryError as error:
            log.warning(
                "dispatch of route %s not enqueued: %s", snapshot.route_id, error_text(error)
            )
            return None

    def _holds_attempt(self, snapshot: RouteSnapshot) -> bool:
        current = read_route(self.connection(), self._settings.keys, snapshot.route_id)
        return attempt_retrying(current, snapshot.attempt)

    def _observed(self, enqueued: list[RouteSnapshot]) -> None:
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
        for task in self._retries:  # the next host's reconciliation takes their routes
            task.cancel()
        self._enqueuing.shutdown(wait=False)
        if self._sync is not None:
            self._sync.close()
