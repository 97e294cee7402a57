"""The measured break of issue 14, through Ray: a route host killed with a batch of reports
in flight. Ray re-sends the batch to the restarted host (`max_task_retries=-1`), which has
meanwhile fired the overdue retries during rehydration, so its routes are `retrying` at
the same generation. Every route must still get exactly one transition per call, and
every due retry must be dispatched once."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
import ray
import redis

from actors.hosting.runtime import RecoveryRuntime, RouteHandle
from actors.keys import KeySpace
from circuits import CircuitSettings
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.dispatch_rig import DELIVER
from tests.actors.fake_dispatcher import calls_key
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

ROUTES = 120
TIMEOUT_S = 120.0


def one_second_retries() -> DynamicProfile:
    return profile(candidate("claude", transient=retries(5, 1, Outcome.STOP)))


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    prefix = f"recovery-replay-{uuid.uuid4().hex[:12]}"
    started = RecoveryRuntime(
        redis_url=redis_url, key_prefix=prefix, dispatcher=DELIVER, worker_count=1,
        # one outage's reports from many routes would open their circuit: not this test's
        circuit_settings=CircuitSettings(transient_threshold=500, max_recent_failures=500),
    ).start()  # fmt: skip
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(prefix))


async def report(route: RouteHandle, generation: int) -> str:
    after = await route.report_failure(
        generation, overloaded(), safe_turn(), caller="office",
        invocation_id=f"inv-{route.route_id}",
    )  # fmt: skip
    return after.state


def reports_per_route(connection: redis.Redis, keys: KeySpace) -> Counter[str]:
    made: Counter[str] = Counter()
    events: list[tuple[bytes, dict[bytes, bytes]]] = connection.xrange(keys.events)  # type: ignore[assignment]  # a bytes client
    for _id, fields in events:
        if fields.get(b"cause") == b"report_failure":
            made[fields[b"route_id"].decode()] += 1
    return made


def dispatches(connection: redis.Redis, keys: KeySpace) -> Counter[tuple[str, int]]:
    calls = [json.loads(c) for c in connection.lrange(calls_key(keys.prefix), 0, -1)]
    return Counter((c["route_id"], c["ordinal"]) for c in calls)


def test_a_batch_replayed_to_a_restarted_host_is_applied_once(
    runtime: RecoveryRuntime, redis_url: str
) -> None:
    keys = KeySpace(runtime.key_prefix)
    connection = redis.Redis.from_url(redis_url)
    ids = [r for r in (f"rp-{n}" for n in range(4 * ROUTES)) if runtime.host_index(r) == 0]
    routes = [runtime.route(route_id) for route_id in ids[:ROUTES]]

    async def drive() -> None:
        for route in routes:
            await route.start(one_second_retries(), caller="office", invocation_id="inv")
        await asyncio.gather(*(report(route, 1) for route in routes))

        async def first_retries_dispatched() -> bool:
            return sum(dispatches(connection, keys).values()) >= ROUTES

        await wait_until(first_retries_dispatched, TIMEOUT_S, redis_url=redis_url)
        # Every route is `retrying` now; its attempt failed: one batch reports it.
        in_flight = asyncio.gather(*(report(route, 1) for route in routes))

        async def batch_applying() -> bool:
            return max(reports_per_route(connection, keys).values()) >= 2

        await wait_until(batch_applying, TIMEOUT_S, redis_url=redis_url)
        ray.kill(routes[0].host, no_restart=False)  # mid-batch: Ray re-sends it
        answered = await in_flight
        assert set(answered) == {"retry_wait"}, Counter(answered)

        async def second_retries_dispatched() -> bool:
            return sum(dispatches(connection, keys).values()) >= 2 * ROUTES

        await wait_until(second_retries_dispatched, TIMEOUT_S, redis_url=redis_url)

    asyncio.run(drive())
    assert reports_per_route(connection, keys) == dict.fromkeys(ids[:ROUTES], 2), (
        "one transition per report call"
    )
    made = dispatches(connection, keys)
    assert set(made.values()) == {1}, "every due retry dispatched once"
    assert sorted({ordinal for _, ordinal in made}) == [1, 2]
