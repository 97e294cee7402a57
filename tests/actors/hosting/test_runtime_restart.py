"""The whole runtime stopped while routes wait, and started again (issue 4, must show):
every pending schedule fires exactly once after the restart and is dispatched exactly
once, none twice. Real Ray hosts, an external Redis, supervised rq workers and the
recording fake dispatcher; waits re-check a condition whenever Redis changes
(`wait_until`), never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Final

import pytest
import redis

from actors.hosting.runtime import RecoveryRuntime
from actors.jobs.ledger import DispatchLedger
from actors.keys import AttemptFence, KeySpace
from actors.routes.models import RouteSnapshot
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.fake_dispatcher import calls_key
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

DELIVER: Final = "tests.actors.fake_dispatcher:deliver"
TIMEOUT_S: Final = 60.0
# Due while the runtime is down (it fires as the new hosts rehydrate), and due after the
# restart (the new hosts arm it). Both are longer than stopping the runtime takes here.
OVERDUE_S: Final = 6  # the shutdown must end first, on a loaded machine too
LATER_S: Final = 12
ROUTES_PER_GROUP: Final = 8


def waiting_profile(interval_s: int) -> DynamicProfile:
    # No provider binding, so no shared circuit: sixteen overload reports would open the
    # provider's circuit (issue 5) and park every route; circuits are tested elsewhere.
    claude = candidate("claude", transient=retries(3, interval_s, Outcome.STOP))
    return profile(claude.model_copy(update={"provider": None}))


def new_runtime(redis_url: str, prefix: str) -> RecoveryRuntime:
    return RecoveryRuntime(
        redis_url=redis_url, key_prefix=prefix, host_count=2, dispatcher=DELIVER
    ).start()


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    chosen = f"recovery-restart-{uuid.uuid4().hex[:12]}"
    yield chosen
    _delete_prefix(redis_url, KeySpace(chosen))


async def wait_all(runtime: RecoveryRuntime, route_ids: list[str]) -> list[RouteSnapshot]:
    """Start every route and report one transient failure: all wait for retry 1."""

    async def one(route_id: str) -> RouteSnapshot:
        route = runtime.route(route_id)
        interval = OVERDUE_S if route_id.startswith("overdue") else LATER_S
        invocation = f"inv-{route_id}"
        await route.start(waiting_profile(interval), caller="office", invocation_id=invocation)
        return await route.report_failure(
            1, overloaded(), safe_turn(), caller="office", invocation_id=invocation
        )

    return await asyncio.gather(*(one(route_id) for route_id in route_ids))


def pending_schedules(connection: redis.Redis, keys: KeySpace) -> dict[str, float]:
    entries: list[tuple[bytes, float]] = connection.zrange(  # type: ignore[assignment]  # redis-py types replies loosely
        keys.schedules, 0, -1, withscores=True
    )
    return {member.decode(): score for member, score in entries}


def dispatched(connection: redis.Redis, prefix: str) -> Counter[tuple[str, int, int]]:
    calls = [json.loads(item) for item in connection.lrange(calls_key(prefix), 0, -1)]
    return Counter((c["route_id"], c["generation"], c["ordinal"]) for c in calls)


async def rehydrated(runtime: RecoveryRuntime) -> int:
    counts: list[int] = [await host.ready.remote() for host in runtime.hosts]
    return sum(counts)


def test_stopping_the_runtime_while_routes_wait_and_starting_it_again_fires_each_once(
    redis_url: str, prefix: str
) -> None:
    keys = KeySpace(prefix)
    route_ids = [f"{group}-{n}" for group in ("overdue", "later") for n in range(ROUTES_PER_GROUP)]
    connection = redis.Redis.from_url(redis_url)
    first = new_runtime(redis_url, prefix)
    second: RecoveryRuntime | None = None
    try:
        assert len({first.host_index(route_id) for route_id in route_ids}) == 2
        waiting = asyncio.run(wait_all(first, route_ids))
        stopping = time.monotonic()
        first.shutdown()
        stopped_s = time.monotonic() - stopping
        schedules = pending_schedules(connection, keys)
        assert sorted(schedules) == sorted(route_ids), "every route still waits while down"
        assert dispatched(connection, prefix) == Counter()
        overdue_at = max(
            s.deadline for s in waiting if s.route_id.startswith("overdue") and s.deadline
        )

        # Some deadlines pass while nothing runs: the moment is the test's input, so it
        # sleeps until then (nothing else could tell it the time has come).
        time.sleep(max(0.0, (overdue_at - datetime.now(UTC)).total_seconds()))
        assert pending_schedules(connection, keys) == schedules, "nothing fired while down"

        restarting = time.monotonic()
        second = new_runtime(redis_url, prefix)
        assert asyncio.run(rehydrated(second)) == len(route_ids), "each host re-armed its own"
        ledger = DispatchLedger(connection, keys)

        async def all_delivered() -> bool:
            outcomes = [ledger.read(AttemptFence(r, 1, 1)).fields.get("outcome") for r in route_ids]
            return outcomes == ["delivered"] * len(route_ids)

        asyncio.run(wait_until(all_delivered, TIMEOUT_S, redis_url=redis_url))
        settled_s = time.monotonic() - restarting
        routes = asyncio.run(_snapshots(second, route_ids))
        histories = asyncio.run(_decisions(second, route_ids))
        pending_timers = asyncio.run(_pending_timers(second))
    finally:
        (second or first).shutdown()
        connection_calls = dispatched(connection, prefix)
        connection.close()

    assert [(r.state, r.generation, r.attempt_ordinal) for r in routes] == [
        ("retrying", 1, 1)
    ] * len(route_ids)
    for route_id, decisions in histories.items():
        assert decisions == ["start", "retry", "deadline_reached"], route_id
    assert connection_calls == Counter({(r, 1, 1): 1 for r in route_ids}), "each once, none twice"
    assert pending_timers == 0
    print(
        f"routes={len(route_ids)} shutdown_s={stopped_s:.2f} restart_to_settled_s={settled_s:.2f}"
    )


async def _snapshots(runtime: RecoveryRuntime, route_ids: list[str]) -> list[RouteSnapshot]:
    return list(await asyncio.gather(*(runtime.route(r).snapshot() for r in route_ids)))


async def _decisions(runtime: RecoveryRuntime, route_ids: list[str]) -> dict[str, list[str]]:
    histories = await asyncio.gather(*(runtime.route(r).history() for r in route_ids))
    return {r: [record.decision for record in h] for r, h in zip(route_ids, histories, strict=True)}


async def _pending_timers(runtime: RecoveryRuntime) -> int:
    counts: list[int] = [await host.pending_timers.remote() for host in runtime.hosts]
    return sum(counts)
