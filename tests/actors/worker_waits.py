"""Waits on supervised rq worker subprocesses (actors/jobs/workers.py) and on routes a
backstop fires, for tests that run real workers on real Redis (no Ray)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import redis

from actors.clock import ManualClock
from actors.engine.service import RouteService
from actors.jobs.workers import WorkerPool
from actors.keys import KeySpace
from actors.routes.commands import RouteSettings
from actors.store.route_store import RouteStore
from policy import Outcome
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

POLL_S = 0.02


def waiting_route(
    url: str, keys: KeySpace, route_id: str, deadline: datetime, host: str
) -> datetime:
    """A route of `host` waiting for its first retry at about `deadline`; its deadline."""

    async def main() -> datetime:
        clock = ManualClock(deadline - timedelta(seconds=1))  # retries(…, 1 s): due at deadline
        async with RouteStore.connect(url, clock=clock, keys=keys) as store:
            service = RouteService(store, clock, settings=RouteSettings(host_id=host))
            chosen = profile(candidate("claude", transient=retries(3, 1, Outcome.STOP)))
            await service.start(route_id, chosen, caller="kanban", invocation_id="inv-1")
            waiting = await service.report_failure(
                route_id, 1, overloaded(), safe_turn(), caller="kanban", invocation_id="inv-1"
            )
        assert waiting.deadline is not None
        return waiting.deadline

    return asyncio.run(main())


def workers_ready(url: str, pool: WorkerPool, backstops: str) -> bool:
    """Every worker past its start (idle in its loop) and the backstop queue's scheduler
    holding its lock."""
    connection = redis.Redis.from_url(url, decode_responses=True)
    try:
        states = [connection.hget(f"rq:worker:{w.name}", "state") for w in pool.workers]
        locked = connection.exists(f"rq:scheduler-lock:{backstops}")
        return all(state == "idle" for state in states) and bool(locked)
    finally:
        connection.close()


def wait_for(condition: Callable[[], bool], timeout_s: float) -> float:
    """Poll `condition()` until it holds (a Redis error counts as not yet); the moment it
    did (time.monotonic). TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return time.monotonic()
        except redis.RedisError:
            pass
        time.sleep(POLL_S)
    raise TimeoutError(f"not met within {timeout_s} s")


def wait_on_redis(condition: Callable[[], bool], timeout_s: float, url: str) -> float:
    """`condition()` re-checked each time a key changes in the Redis at `url` (wait_until
    of tests/actors/redis_waits.py, for a condition over Redis that needs no outage
    survived); the moment it held (time.monotonic). TimeoutError after `timeout_s`."""

    async def holds() -> bool:
        return condition()

    asyncio.run(wait_until(holds, timeout_s, redis_url=url))
    return time.monotonic()
