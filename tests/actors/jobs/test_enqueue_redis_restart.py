"""Chaos bug A: Redis restarting between the attempt's ledger `queued` and rq's job left
the route `retrying` with no job, for good (only a host start or `recovery reconcile`
would enqueue it). A route host's HostDispatch enqueues it again once Redis is back.
On a real embedded redis-server of the test's own, stopped and started again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
import redis

from actors.clock import ManualClock
from actors.engine.settings import EngineSettings
from actors.hosting.host_dispatch import RETRY_MAX_S, HostDispatch
from actors.hosting.metrics import RouteMetrics
from actors.jobs.ledger import DispatchLedger
from actors.jobs.queue import dispatch_job_id, dispatch_queue
from actors.store.embedded import EmbeddedRedis
from tests.actors.conftest import Backend, unique_keys
from tests.actors.dispatch_rig import DELIVER, retrying
from tests.actors.redis_waits import wait_until
from tests.actors.route_builders import T0

pytestmark = pytest.mark.integration

GUARD_S = 4 * RETRY_MAX_S  # a guard against a hang only


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    embedded = EmbeddedRedis(tmp_path / "redis")
    embedded.start()
    yield embedded
    embedded.stop()


class _Tally:
    """What the host's Ray metrics would be told (no Ray here)."""

    def __init__(self) -> None:
        self.count = 0

    def inc(self, value: float = 1.0) -> None:
        self.count += int(value)

    def observe(self, value: float) -> None:
        """Latencies are not what this test checks."""


def test_a_dispatch_a_restarting_redis_refused_is_enqueued_once_redis_is_back(
    server: EmbeddedRedis,
) -> None:
    keys = unique_keys()
    snapshot = retrying(Backend("redis", keys, ManualClock(T0), url=server.url))
    job_id = dispatch_job_id(keys, snapshot.attempt)
    settings = EngineSettings(
        key_prefix=keys.prefix, dispatcher=DELIVER, queue_name=f"{keys.prefix}-dispatch"
    )
    connection = redis.Redis.from_url(server.url)
    queue = dispatch_queue(connection, f"{keys.prefix}-dispatch")
    tally = _Tally()
    metrics = cast(RouteMetrics, SimpleNamespace(dispatches=tally, dispatch_enqueue=tally))
    dispatch = HostDispatch("h-0", server.url, settings, clock=ManualClock(T0), metrics=metrics)

    async def job_queued() -> bool:
        return queue.get_job_ids() == [job_id]

    async def scenario() -> None:
        # the ledger was written `queued`; Redis went away before rq's job
        DispatchLedger(connection, keys).queue(snapshot.attempt, job_id, T0)
        server.stop()
        await dispatch.enqueue([snapshot])
        assert tally.count == 0
        server.start()
        await wait_until(job_queued, GUARD_S, redis_url=server.url)

    try:
        asyncio.run(scenario())
    finally:
        dispatch.close()
        connection.close()
    assert tally.count == 1
