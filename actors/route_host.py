"""`RouteHost`: an async Ray actor hosting the logical route actors hashed to it.

The host owns a RouteService over its own RouteStore (a bounded redis.asyncio pool) and
forwards the route API to it. Every written route joins the host's index set in Redis
(`RouteSettings.host_id`). After every call, the answer — the snapshot Redis returned —
arms, re-arms or cancels that route's in-process timer (actors/route_timers.py); a timer
calls the fenced `fire_due(route_id, generation, ordinal)`.

On start (including every restart by Ray, `max_restarts=-1`) the host rehydrates: it
reads the pending schedules of the routes in its index set and arms them, so overdue ones
fire at once; then it freezes the GC generations (`gc.freeze()`) so long-lived route state
stays out of full collections, which are the tail of timer lateness (DESIGN.md §5a).
Calls wait for rehydration to finish.

Declared as a plain class; the runtime wraps it with `ray.remote(max_restarts=-1,
max_task_retries=-1)`. With task retries on, a call whose first attempt committed before
the host died is sent again to the restarted host and comes back rejected (a
TransitionRejectedError carrying the route's actual generation and state): see
`actors.runtime.committed_by_retry`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.clock import Clock, SystemClock
from actors.errors import RecoveryError
from actors.keys import KeySpace, valid_host_id
from actors.route_commands import RouteSettings
from actors.route_models import AttemptRecord, CallerContext, RouteSnapshot, ScheduleEntry
from actors.route_profiles import RouteProfile
from actors.route_service import RouteService
from actors.route_timers import RouteTimers
from actors.routes_store import DEFAULT_MAX_CONNECTIONS, RouteStore
from catalogue import Classification, Evidence
from policy import TurnEvidence

REHYDRATE_RETRY_S: Final = 1.0

log = logging.getLogger(__name__)


class RouteHost:
    def __init__(
        self,
        host_id: str,
        redis_url: str,
        key_prefix: str,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        clock: Clock | None = None,
    ) -> None:
        self.host_id = valid_host_id(host_id)
        self._clock = clock or SystemClock()
        self._keys = KeySpace(key_prefix)
        self._redis_url = redis_url
        self._store = RouteStore.connect(
            redis_url, clock=self._clock, keys=self._keys, max_connections=max_connections
        )
        settings = RouteSettings(host_id=self.host_id)
        self._service = RouteService(self._store, self._clock, settings=settings)
        self._timers = RouteTimers(self._service.fire_due, self._clock)
        self._rehydrated: list[ScheduleEntry] = []
        # Ray runs an async actor's __init__ on its event loop: start rehydrating now,
        # without waiting for a first call (a restarted host has timers to fire).
        self._ready = asyncio.get_running_loop().create_task(self._rehydrate())

    # Lifecycle and introspection

    async def ready(self) -> int:
        """Wait for rehydration; the number of schedules it armed."""
        await self._ready
        return len(self._rehydrated)

    async def process_id(self) -> int:
        return os.getpid()

    async def pending_timers(self) -> int:
        await self._ready
        return len(self._timers)

    async def aclose(self) -> None:
        """Cancel the timers and close the Redis pool (the schedules stay in Redis)."""
        self._timers.cancel_all()
        await self._store.aclose()

    async def _rehydrate(self) -> None:
        while True:
            try:
                entries = await self._own_schedules()
                break
            except (RedisError, RecoveryError) as error:  # Redis not reachable yet
                log.warning("route host %s cannot rehydrate yet: %s", self.host_id, error)
                await asyncio.sleep(REHYDRATE_RETRY_S)
        for entry in entries:
            self._timers.arm_schedule(entry)
        self._rehydrated = entries
        gc.collect()
        gc.freeze()
        log.info("route host %s rehydrated %d schedules", self.host_id, len(entries))

    async def _own_schedules(self) -> list[ScheduleEntry]:
        index = Redis.from_url(self._redis_url, decode_responses=True)
        try:
            members = await index.smembers(self._keys.host_routes(self.host_id))
        finally:
            await index.aclose()
        if not members:
            return []
        owned = {str(member) for member in members}
        return [entry for entry in await self._store.schedules() if entry.route_id in owned]

    # The route API: every answer also sets the route's timer

    async def start(
        self, route_id: str, profile: RouteProfile, *, caller: CallerContext, invocation_id: str
    ) -> RouteSnapshot:
        await self._ready
        return self._tracked(
            await self._service.start(route_id, profile, caller=caller, invocation_id=invocation_id)
        )

    async def report_failure(
        self,
        route_id: str,
        expected_generation: int,
        evidence: Evidence | Classification,
        turn: TurnEvidence | None,
        *,
        caller: CallerContext,
        invocation_id: str,
    ) -> RouteSnapshot:
        await self._ready
        snapshot = await self._service.report_failure(
            route_id, expected_generation, evidence, turn, caller=caller,
            invocation_id=invocation_id,
        )  # fmt: skip
        return self._tracked(snapshot)

    async def report_success(self, route_id: str, expected_generation: int) -> RouteSnapshot:
        await self._ready
        return self._tracked(await self._service.report_success(route_id, expected_generation))

    async def retry_now(self, route_id: str, expected_generation: int) -> RouteSnapshot:
        await self._ready
        return self._tracked(await self._service.retry_now(route_id, expected_generation))

    async def skip_now(self, route_id: str, expected_generation: int) -> RouteSnapshot:
        await self._ready
        return self._tracked(await self._service.skip_now(route_id, expected_generation))

    async def cancel_wait(self, route_id: str, expected_generation: int) -> RouteSnapshot:
        await self._ready
        return self._tracked(await self._service.cancel_wait(route_id, expected_generation))

    async def stop(self, route_id: str, expected_generation: int) -> RouteSnapshot:
        await self._ready
        return self._tracked(await self._service.stop(route_id, expected_generation))

    async def resume(self, route_id: str, expected_generation: int) -> RouteSnapshot:
        await self._ready
        return self._tracked(await self._service.resume(route_id, expected_generation))

    async def start_fresh(
        self, route_id: str, expected_generation: int, profile: RouteProfile | None = None
    ) -> RouteSnapshot:
        await self._ready
        snapshot = await self._service.start_fresh(route_id, expected_generation, profile)
        return self._tracked(snapshot)

    async def close(self, route_id: str, expected_generation: int) -> RouteSnapshot:
        await self._ready
        return self._tracked(await self._service.close(route_id, expected_generation))

    async def fire_due(self, route_id: str, generation: int, ordinal: int) -> RouteSnapshot:
        """What a timer does; also the entry point of a durable backstop."""
        await self._ready
        return self._tracked(await self._service.fire_due(route_id, generation, ordinal))

    async def snapshot(self, route_id: str) -> RouteSnapshot:
        await self._ready
        return await self._service.snapshot(route_id)

    async def history(self, route_id: str) -> list[AttemptRecord]:
        await self._ready
        return await self._service.history(route_id)

    def _tracked(self, snapshot: RouteSnapshot) -> RouteSnapshot:
        self._timers.track(snapshot)
        return snapshot
