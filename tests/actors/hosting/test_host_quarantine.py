"""Issue 19, break 2, through a route host in this process (no Ray) and the backstop job,
on the session's real Redis: one malformed key never takes a prefix down. A corrupt route
is quarantined (`action_required`, `corrupt: <key> <field>: ...`); hosts get ready, timer
batches keep their healthy routes, reconciliation and the backstop go on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
import redis
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.clock import ManualClock
from actors.engine.service import RouteService
from actors.engine.settings import EngineSettings
from actors.hosting.route_host import RouteHost
from actors.jobs.backstop import fire_backstop
from actors.jobs.queue import dispatch_queue
from actors.keys import KeySpace
from actors.routes.commands import FireDue, RouteSettings
from actors.routes.models import RouteSnapshot
from actors.store.route_store import RouteStore
from actors.store.sync_reads import read_route
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = pytest.mark.integration

HOST = "host-0"
DELIVER = "tests.actors.fake_dispatcher:deliver"
READY_TIMEOUT_S = 20.0  # a guard against a hang: a host is ready in well under 1 s


def one_second_retries() -> DynamicProfile:
    return profile(candidate("claude", transient=retries(3, 1, Outcome.STOP)))


@dataclass
class Prefix:
    url: str
    keys: KeySpace
    connection: redis.Redis

    def settings(self, *, dispatcher: str | None = None) -> EngineSettings:
        return EngineSettings(
            key_prefix=self.keys.prefix, dispatcher=dispatcher,
            queue_name=f"{self.keys.prefix}-dispatch",
        )  # fmt: skip

    def write(self, route_ids: list[str], *, ago_s: float, fire: bool = False) -> None:
        """Routes of HOST waiting for retry 1 (due `ago_s` - 1 s ago), or `fire`d: retrying."""

        async def main() -> None:
            clock = ManualClock(datetime.now(UTC) - timedelta(seconds=ago_s))
            async with RouteStore.connect(self.url, clock=clock, keys=self.keys) as store:
                service = RouteService(store, clock, settings=RouteSettings(host_id=HOST))
                for route_id in route_ids:
                    invocation = f"inv-{route_id}"
                    await service.start(
                        route_id, one_second_retries(), caller="kanban", invocation_id=invocation
                    )
                    await service.report_failure(
                        route_id, 1, overloaded(), safe_turn(), caller="kanban",
                        invocation_id=invocation,
                    )  # fmt: skip
                if fire:
                    clock.advance(timedelta(seconds=2))
                    await service.run_many([(r, FireDue(1, 1)) for r in route_ids])

        asyncio.run(main())

    def route(self, route_id: str) -> RouteSnapshot:
        return read_route(self.connection, self.keys, route_id)

    def corrupt(self, key: str, field: str, text: str) -> None:
        self.connection.hset(key, field, text)


@pytest.fixture
def prefix(redis_url: str) -> Iterator[Prefix]:
    keys = unique_keys()
    connection = redis.Redis.from_url(redis_url)
    yield Prefix(redis_url, keys, connection)
    queue = dispatch_queue(connection, f"{keys.prefix}-dispatch")
    for job_id in queue.scheduled_job_registry.get_job_ids():
        Job.fetch(job_id, connection=connection, serializer=JSONSerializer).delete()
    queue.delete(delete_jobs=True)
    connection.close()
    _delete_prefix(redis_url, keys)


def quarantined(route: RouteSnapshot, key: str, field: str) -> bool:
    return route.state == "action_required" and (route.reason or "").startswith(
        f"corrupt: {key} {field}: "
    )


def test_a_bad_deadline_in_one_schedule_quarantines_its_route_and_the_host_gets_ready(
    prefix: Prefix,
) -> None:
    healthy = [f"healthy-{i}" for i in range(10)]
    prefix.write([*healthy, "poisoned"], ago_s=30)
    schedule_key = prefix.keys.schedule("poisoned")
    prefix.corrupt(schedule_key, "deadline", "not-a-time")

    async def scenario() -> None:
        host = RouteHost(HOST, prefix.url, prefix.settings())
        try:
            await asyncio.wait_for(host.ready(), READY_TIMEOUT_S)

            async def settled() -> bool:
                routes = [prefix.route(r) for r in healthy]
                return all(r.state == "retrying" for r in routes) and quarantined(
                    prefix.route("poisoned"), schedule_key, "deadline"
                )

            await wait_until(settled, READY_TIMEOUT_S, redis_url=prefix.url)
        finally:
            await host.aclose()

    asyncio.run(scenario())
    assert prefix.connection.exists(schedule_key) == 0


def test_bad_json_in_a_waiting_routes_policy_snapshot_never_drops_its_timer_batch(
    prefix: Prefix,
) -> None:
    """The host's own timers: armed at rehydration, due together, fired as one batch."""
    healthy = [f"healthy-{i}" for i in range(10)]
    prefix.write([*healthy, "poisoned"], ago_s=30)
    route_key = prefix.keys.route("poisoned")
    prefix.corrupt(route_key, "policy_snapshot", '{"transient": ')

    async def scenario() -> None:
        host = RouteHost(HOST, prefix.url, prefix.settings())
        try:
            await asyncio.wait_for(host.ready(), READY_TIMEOUT_S)

            async def settled() -> bool:
                routes = [prefix.route(r) for r in healthy]
                return all(r.state == "retrying" for r in routes) and quarantined(
                    prefix.route("poisoned"), route_key, "policy_snapshot"
                )

            await wait_until(settled, READY_TIMEOUT_S, redis_url=prefix.url)
            assert await host.pending_timers() == 0  # none left retrying every second
        finally:
            await host.aclose()

    asyncio.run(scenario())


def test_bad_json_in_a_retrying_routes_profile_is_quarantined_and_the_others_reconciled(
    prefix: Prefix,
) -> None:
    prefix.write(["healthy", "poisoned"], ago_s=30, fire=True)
    route_key = prefix.keys.route("poisoned")
    prefix.corrupt(route_key, "profile", "{not json")

    async def scenario() -> None:
        host = RouteHost(HOST, prefix.url, prefix.settings(dispatcher=DELIVER))
        try:
            await asyncio.wait_for(host.ready(), READY_TIMEOUT_S)
            report = await host.reconciled()
            assert report is not None
            assert (report.requeued, report.quarantined) == (["healthy"], ["poisoned"])
            [again] = await host.run_batch([("poisoned", FireDue(1, 1))])
            assert isinstance(again, RouteSnapshot), again
            assert quarantined(again, route_key, "profile")
        finally:
            await host.aclose()

    asyncio.run(scenario())
    assert prefix.route("healthy").state == "retrying"


def test_the_backstop_job_quarantines_corrupt_routes_and_fires_every_healthy_one(
    prefix: Prefix,
) -> None:
    """It died mid-loop on a bad schedule and re-armed itself forever on a bad route."""
    healthy = [f"healthy-{i}" for i in range(10)]
    prefix.write([*healthy, "bad-route", "bad-schedule"], ago_s=30)
    prefix.corrupt(prefix.keys.route("bad-route"), "policy_snapshot", "{oops")
    prefix.corrupt(prefix.keys.schedule("bad-schedule"), "ordinal", "first")
    now = datetime.now(UTC)
    report = fire_backstop(
        prefix.connection, f"{prefix.keys.prefix}-dispatch", prefix.keys, HOST,
        int(now.timestamp()), dispatcher=DELIVER, clock=ManualClock(now),
    )  # fmt: skip
    assert sorted(report.fired) == sorted(healthy)
    assert sorted(report.dispatched) == sorted(healthy)
    assert (report.failed, report.rearmed) == (0, None)
    assert quarantined(prefix.route("bad-route"), prefix.keys.route("bad-route"), "policy_snapshot")
    assert quarantined(
        prefix.route("bad-schedule"), prefix.keys.schedule("bad-schedule"), "ordinal"
    )
