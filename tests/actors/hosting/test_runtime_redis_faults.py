"""A Redis write that fails, end to end through the runtime (issue 4, must show): the
caller gets a typed error naming what failed (StoreUnavailableError, a RecoveryError),
and nothing happens — no schedule in Redis, no timer in the host, no rq backstop, no
dispatch. Each fault is then removed and the same call succeeds, so the checks of
"nothing" are made where something would have happened. Real Ray hosts, real Redis,
supervised rq workers with the recording fake dispatcher.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import redis
from rq import Queue
from rq.serializers import JSONSerializer

from actors.errors import RecoveryError, StoreUnavailableError
from actors.hosting.runtime import RecoveryRuntime, RouteHandle
from actors.jobs.ledger import DispatchLedger
from actors.keys import AttemptFence, KeySpace
from actors.routes.models import RouteSnapshot
from actors.store.embedded import EmbeddedRedis
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.fake_dispatcher import calls_key
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

DELIVER: Final = "tests.actors.fake_dispatcher:deliver"
TIMEOUT_S: Final = 30.0
R: Final = "fault-1"


def retries_every(interval_s: int) -> DynamicProfile:
    return profile(candidate("claude", transient=retries(3, interval_s, Outcome.STOP)))


def unique_prefix() -> str:
    return f"recovery-fault-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = RecoveryRuntime(
        redis_url=redis_url, key_prefix=unique_prefix(), host_count=2, dispatcher=DELIVER
    ).start()
    try:
        yield started
    finally:
        started.shutdown()
        _delete_prefix(redis_url, KeySpace(started.key_prefix))


@pytest.fixture
def connection(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


async def report(route: RouteHandle) -> RouteSnapshot:
    return await route.report_failure(
        1, overloaded(), safe_turn(), caller="kanban", invocation_id=f"inv-{route.route_id}"
    )


async def started(route: RouteHandle, interval_s: int) -> RouteSnapshot:
    invocation = f"inv-{route.route_id}"
    return await route.start(retries_every(interval_s), caller="kanban", invocation_id=invocation)


async def pending_timers(runtime: RecoveryRuntime) -> int:
    counts: list[int] = [await host.pending_timers.remote() for host in runtime.hosts]
    return sum(counts)


def nothing_dispatched(runtime: RecoveryRuntime, connection: redis.Redis) -> dict[str, Any]:
    """Everything that would show a dispatch or a backstop, as Redis has it."""
    keys = KeySpace(runtime.key_prefix)
    queue = Queue(runtime.queue, connection=connection, serializer=JSONSerializer)
    return {
        "ledger": DispatchLedger(connection, keys).read(AttemptFence(R, 1, 1)).state,
        "calls": connection.llen(calls_key(runtime.key_prefix)),
        "queued": queue.count,
        "scheduled_jobs": queue.scheduled_job_registry.count,
    }


NOTHING: Final = {"ledger": "none", "calls": 0, "queued": 0, "scheduled_jobs": 0}


def delivered_once(runtime: RecoveryRuntime, connection: redis.Redis) -> None:
    ledger = DispatchLedger(connection, KeySpace(runtime.key_prefix))

    async def delivered() -> bool:
        return ledger.read(AttemptFence(R, 1, 1)).fields.get("outcome") == "delivered"

    asyncio.run(wait_until(delivered, TIMEOUT_S, redis_url=runtime.url))
    calls = [json.loads(c) for c in connection.lrange(calls_key(runtime.key_prefix), 0, -1)]
    assert [(c["route_id"], c["generation"], c["ordinal"]) for c in calls] == [(R, 1, 1)]


def test_a_failure_report_the_transition_script_refuses_raises_and_arms_nothing(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    keys = KeySpace(runtime.key_prefix)
    route = runtime.route(R)
    asyncio.run(started(route, interval_s=1))
    connection.set(keys.schedule(R), "not a schedule hash")  # the script checks key types

    with pytest.raises(StoreUnavailableError) as raised:
        asyncio.run(report(route))
    error = raised.value
    assert isinstance(error, RecoveryError)
    assert error.operation in ("apply", "apply_many")
    assert "WRONGTYPE" in error.detail
    assert keys.schedule(R) in error.detail, "the error names the key that failed"

    snapshot = asyncio.run(route.snapshot())
    assert (snapshot.state, snapshot.generation, snapshot.deadline) == ("active", 1, None)
    assert [r.decision for r in asyncio.run(route.history())] == ["start"]
    assert connection.zscore(keys.schedules, R) is None
    assert connection.get(keys.schedule(R)) == b"not a schedule hash", "nothing written"
    assert asyncio.run(pending_timers(runtime)) == 0
    assert nothing_dispatched(runtime, connection) == NOTHING

    connection.delete(keys.schedule(R))  # the fault gone, the same report goes through
    waiting = asyncio.run(report(route))
    assert (waiting.state, waiting.attempt_ordinal) == ("retry_wait", 1)
    delivered_once(runtime, connection)


def test_a_retry_now_the_transition_script_refuses_dispatches_nothing(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    keys = KeySpace(runtime.key_prefix)
    route = runtime.route(R)
    asyncio.run(started(route, interval_s=60))
    waiting = asyncio.run(report(route))
    assert waiting.state == "retry_wait"
    assert asyncio.run(pending_timers(runtime)) == 1
    history = connection.lrange(keys.attempts(R), 0, -1)
    connection.delete(keys.attempts(R))
    connection.set(keys.attempts(R), "not a history list")

    with pytest.raises(StoreUnavailableError) as raised:
        asyncio.run(route.retry_now(1))
    assert "WRONGTYPE" in raised.value.detail
    assert keys.attempts(R) in raised.value.detail

    snapshot = asyncio.run(route.snapshot())
    assert (snapshot.state, snapshot.deadline) == ("retry_wait", waiting.deadline)
    assert connection.zscore(keys.schedules, R) is not None, "the wait is still pending"
    assert asyncio.run(pending_timers(runtime)) == 1, "its timer stays as it was"
    # (a durable backstop job of the pending wait may be scheduled: not a dispatch)
    assert {**nothing_dispatched(runtime, connection), "scheduled_jobs": 0} == NOTHING

    connection.delete(keys.attempts(R))
    connection.rpush(keys.attempts(R), *history)
    retrying = asyncio.run(route.retry_now(1))
    assert retrying.state == "retrying"
    delivered_once(runtime, connection)


def test_a_call_while_redis_is_stopped_raises_and_arms_nothing(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    url = server.start()
    runtime = RecoveryRuntime(redis_url=url, key_prefix=unique_prefix(), host_count=1)
    try:
        runtime.start()
        route = runtime.route(R)
        asyncio.run(started(route, interval_s=30))  # its timer must still be pending when counted
        server.stop()

        with pytest.raises(StoreUnavailableError) as raised:
            asyncio.run(report(route))
        assert "ConnectionError" in raised.value.detail
        assert asyncio.run(pending_timers(runtime)) == 0

        server.start()  # the same data folder: what was written before is back
        keys = KeySpace(runtime.key_prefix)
        client = redis.Redis.from_url(url)
        try:
            assert client.zcard(keys.schedules) == 0, "no schedule was written"
            assert client.llen(keys.attempts(R)) == 1, "the start, nothing after it"
        finally:
            client.close()
        snapshot = asyncio.run(route.snapshot())
        assert (snapshot.state, snapshot.generation) == ("active", 1)
        assert asyncio.run(report(route)).state == "retry_wait"
        assert asyncio.run(pending_timers(runtime)) == 1
    finally:
        runtime.shutdown()
        server.stop()
