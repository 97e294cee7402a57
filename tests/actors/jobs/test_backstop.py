"""The durable backstop of route timers (actors/jobs/backstop.py).

Unit tier (fakeredis[lua]): job ids, the covering second, coalescing through the memo and
the Redis marker, the host side that arms off the event loop. Integration tier (real Redis,
rq's SimpleWorker in burst mode with its scheduler, in process): a schedule whose host is
gone is fired and dispatched once by the backstop; repeats, early runs and a host timer
that won are no-ops or re-arms. Routes are written with a manual clock set in the past,
so their backstop jobs are already due for rq and nothing waits on the wall clock.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import fakeredis
import pytest
import ray
import redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.clock import ManualClock
from actors.engine.service import RouteService
from actors.hosting.runtime import RecoveryRuntime
from actors.jobs.backstop import fire_backstop
from actors.jobs.backstop_arming import (
    JOB_FUNCTION,
    MARKER_SLACK_S,
    BackstopArmer,
    HostBackstops,
    backstop_job_id,
    backstop_second,
)
from actors.jobs.ledger import DispatchLedger
from actors.jobs.queue import backstop_queue_name, dispatch_queue, enqueue_dispatch
from actors.jobs.rq_worker import PromptTeardownWorker
from actors.keys import AttemptFence, KeySpace
from actors.routes.commands import RouteSettings
from actors.routes.models import RouteSnapshot
from actors.store.pool import connection_url
from actors.store.route_store import RouteStore
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.actors.fake_dispatcher import calls_key
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

DELIVER = "tests.actors.fake_dispatcher:deliver"
HOST = "host-0"
NOW = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)


# Unit tier


def armer_on(
    connection: redis.Redis, keys: KeySpace, clock: ManualClock, *, grace_s: int = 1
) -> BackstopArmer:
    return BackstopArmer(lambda: connection, "q", keys, HOST, DELIVER, clock=clock, grace_s=grace_s)


def scheduled_ids(connection: redis.Redis, name: str = "q-backstops") -> list[str]:
    return list(dispatch_queue(connection, name).scheduled_job_registry.get_job_ids())


def test_a_backstop_job_id_is_the_same_everywhere_and_uses_only_rq_characters() -> None:
    first = backstop_job_id(KeySpace("recovery"), HOST, 1_772_366_401)
    assert first == backstop_job_id(KeySpace("recovery"), HOST, 1_772_366_401)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", first)
    others = {
        backstop_job_id(KeySpace("recovery"), HOST, 1_772_366_402),
        backstop_job_id(KeySpace("recovery"), "host-1", 1_772_366_401),
        backstop_job_id(KeySpace("recovery:b"), HOST, 1_772_366_401),
    }
    assert first not in others
    assert len(others) == 3


def test_a_deadline_is_covered_by_its_whole_second_never_by_one_already_begun() -> None:
    second = math.floor(NOW.timestamp())
    assert backstop_second(NOW + timedelta(seconds=2.1), NOW) == second + 3
    assert backstop_second(datetime.fromtimestamp(second + 5, UTC), NOW) == second + 5
    # due now or overdue: the next second, whose job cannot have run yet
    assert backstop_second(NOW, NOW) == second + 1
    assert backstop_second(NOW - timedelta(hours=1), NOW) == second + 1


def test_a_thousand_timers_in_one_second_enqueue_one_job_and_touch_redis_once() -> None:
    connection = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    connects: list[int] = []

    def counting() -> redis.Redis:
        connects.append(1)
        return connection

    clock = ManualClock(NOW)
    armer = BackstopArmer(counting, "q", unique_keys(), HOST, DELIVER, clock=clock)
    base = NOW + timedelta(seconds=10)
    deadlines = [base + timedelta(microseconds=700 * i) for i in range(1000)]
    enqueued = [second for deadline in deadlines for second in armer.arm([deadline])]

    assert enqueued == [math.ceil(base.timestamp())]
    assert len(connects) == 1  # every later arm was answered by the memo
    [job_id] = scheduled_ids(connection)
    job = Job.fetch(job_id, connection=connection, serializer=JSONSerializer)
    assert job.func_name == JOB_FUNCTION
    assert job.args == [armer.keys.prefix, HOST, enqueued[0], DELIVER, "q"]


def test_the_marker_stops_a_second_process_from_enqueueing_the_same_second() -> None:
    connection = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    keys, clock = unique_keys(), ManualClock(NOW)
    deadline = NOW + timedelta(seconds=30.5)
    assert armer_on(connection, keys, clock).arm([deadline]) == [math.ceil(deadline.timestamp())]
    restarted = armer_on(connection, keys, clock)  # a fresh memo: another process
    assert restarted.arm([deadline]) == []
    assert restarted.is_armed(math.ceil(deadline.timestamp()))
    assert len(scheduled_ids(connection)) == 1
    # the marker lives until the job's time (31 s + 1 s grace from now) and some slack
    ttl = connection.ttl(keys.backstop(HOST, math.ceil(deadline.timestamp())))
    assert 31 + 1 + MARKER_SLACK_S - 2 <= ttl <= 31 + 1 + MARKER_SLACK_S


def test_a_lost_marker_never_schedules_the_same_job_twice() -> None:
    connection = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    keys, clock = unique_keys(), ManualClock(NOW)
    deadline = NOW + timedelta(seconds=5)
    assert armer_on(connection, keys, clock).arm([deadline]) != []
    connection.delete(keys.backstop(HOST, math.ceil(deadline.timestamp())))
    assert armer_on(connection, keys, clock).arm([deadline]) == []  # rq refused the id
    assert len(scheduled_ids(connection)) == 1


def test_the_backstop_job_is_scheduled_after_its_second_by_the_grace() -> None:
    connection = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    keys, clock = unique_keys(), ManualClock(NOW)
    [second] = armer_on(connection, keys, clock, grace_s=2).arm([NOW + timedelta(seconds=4)])
    registry = dispatch_queue(connection, "q-backstops").scheduled_job_registry
    assert registry.get_job_ids() == [backstop_job_id(keys, HOST, second)]
    assert connection.zscore(registry.key, backstop_job_id(keys, HOST, second)) == second + 2


def test_the_host_side_covers_a_thousand_timers_with_one_job_off_the_loop() -> None:
    connection = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    keys, clock = unique_keys(), ManualClock(NOW)
    backstops = HostBackstops(armer_on(connection, keys, clock))

    async def scenario() -> None:
        for index in range(1000):
            backstops.cover(NOW + timedelta(seconds=7, microseconds=700 * index))
        await backstops.flushed()

    asyncio.run(scenario())
    assert len(scheduled_ids(connection)) == 1
    assert backstops.armer.is_armed(math.ceil((NOW + timedelta(seconds=7)).timestamp()))


def test_a_redis_error_while_arming_is_logged_and_a_later_cover_arms_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = fakeredis.FakeServer()
    connection = fakeredis.FakeRedis(server=server)
    keys, clock = unique_keys(), ManualClock(NOW)
    backstops = HostBackstops(armer_on(connection, keys, clock))
    deadline = NOW + timedelta(seconds=3)

    async def scenario() -> None:
        server.connected = False
        backstops.cover(deadline)  # does not raise: the answer is unaffected
        await backstops.flushed()
        server.connected = True
        backstops.cover(deadline)
        await backstops.flushed()

    with caplog.at_level(logging.WARNING, logger="actors.jobs.backstop"):
        asyncio.run(scenario())
    assert any("not armed" in record.getMessage() for record in caplog.records)
    assert len(scheduled_ids(connection)) == 1


def test_the_connection_url_a_job_derives_reaches_the_same_redis() -> None:
    for url in ("unix:///tmp/r%20s.sock?db=2", "redis://:p%40ss@cache:6380/1"):
        kwargs = redis.Redis.from_url(url).connection_pool.connection_kwargs
        derived = redis.Redis.from_url(connection_url(redis.Redis.from_url(url)))
        again = derived.connection_pool.connection_kwargs
        for name in ("path", "host", "port", "db", "password"):
            assert again.get(name) == kwargs.get(name), (url, name)


def test_the_backstop_job_module_never_imports_ray() -> None:
    code = "import sys, actors.jobs.backstop; print('ray' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# Integration tier


def one_second_retries() -> DynamicProfile:
    return profile(candidate("claude", transient=retries(3, 1, Outcome.SKIP)), candidate("codex"))


@dataclass
class Rig:
    """Real Redis, the test's own prefix and dispatch queue, and a manual clock an hour
    in the past (so the backstops of its deadlines are already due for rq)."""

    url: str
    connection: redis.Redis
    keys: KeySpace
    clock: ManualClock

    @property
    def queue(self) -> Queue:
        return dispatch_queue(self.connection, f"{self.keys.prefix}-dispatch")

    @property
    def backstops(self) -> Queue:
        return dispatch_queue(self.connection, backstop_queue_name(self.queue.name))

    def armer(self, host_id: str = HOST) -> BackstopArmer:
        return BackstopArmer(
            lambda: self.connection, self.queue.name, self.keys, host_id, DELIVER,
            clock=self.clock,
        )  # fmt: skip

    def work(self) -> None:
        queues = [self.backstops, self.queue]
        worker = PromptTeardownWorker(queues, connection=self.connection, serializer=JSONSerializer)
        worker.work(burst=True, with_scheduler=True)

    def waiting_route(self, route_id: str, host_id: str = HOST) -> RouteSnapshot:
        """A route waiting 1 s for its first retry, written as host `host_id` would."""

        async def main() -> RouteSnapshot:
            settings = RouteSettings(host_id=host_id)
            async with RouteStore.connect(self.url, clock=self.clock, keys=self.keys) as store:
                service = RouteService(store, self.clock, settings=settings)
                invocation = f"inv-{route_id}"
                await service.start(
                    route_id, one_second_retries(), caller="kanban", invocation_id=invocation
                )
                return await service.report_failure(
                    route_id, 1, overloaded(), safe_turn(), caller="kanban",
                    invocation_id=invocation,
                )  # fmt: skip

        snapshot = asyncio.run(main())
        assert snapshot.state == "retry_wait"
        assert snapshot.deadline is not None
        return snapshot

    def decisions(self, route_id: str) -> list[str]:
        async def main() -> list[str]:
            async with RouteStore.connect(self.url, clock=self.clock, keys=self.keys) as store:
                return [record.decision for record in await store.history(route_id)]

        return asyncio.run(main())

    def calls(self) -> list[dict[str, Any]]:
        raw = self.connection.lrange(calls_key(self.keys.prefix), 0, -1)
        return [json.loads(item) for item in raw]

    def result(self, job_id: str) -> Any:
        job = Job.fetch(job_id, connection=self.connection, serializer=JSONSerializer)
        return job.return_value()


@pytest.fixture
def rig(redis_url: str) -> Iterator[Rig]:
    connection = redis.Redis.from_url(redis_url)
    keys = unique_keys()
    now = datetime.now(UTC).replace(microsecond=250_000) - timedelta(hours=1)
    found = Rig(redis_url, connection, keys, ManualClock(now))
    yield found
    queue = found.queue
    registries = [
        registry
        for q in (queue, found.backstops)
        for registry in (q.scheduled_job_registry, q.finished_job_registry)
    ]
    for job_id in [job_id for registry in registries for job_id in registry.get_job_ids()]:
        Job.fetch(job_id, connection=connection, serializer=JSONSerializer).delete()
    queue.delete(delete_jobs=True)
    found.backstops.delete(delete_jobs=True)
    connection.close()
    _delete_prefix(redis_url, keys)


@pytest.mark.integration
def test_a_schedule_whose_host_is_gone_is_fired_and_dispatched_once_by_the_backstop(
    rig: Rig,
) -> None:
    waiting = rig.waiting_route("session-1")
    assert waiting.deadline is not None
    [second] = rig.armer().arm([waiting.deadline])
    rig.work()

    assert rig.decisions("session-1") == ["start", "retry", "deadline_reached"]
    [call] = rig.calls()
    assert (call["route_id"], call["generation"], call["ordinal"]) == ("session-1", 1, 1)
    entry = DispatchLedger(rig.connection, rig.keys).read(AttemptFence("session-1", 1, 1))
    assert (entry.state, entry.fields["outcome"]) == ("finished", "delivered")
    result = rig.result(backstop_job_id(rig.keys, HOST, second))
    assert (result["fired"], result["dispatched"], result["rearmed"]) == (
        ["session-1"], ["session-1"], None
    )  # fmt: skip


@pytest.mark.integration
def test_the_same_backstop_job_run_twice_fires_and_dispatches_once(rig: Rig) -> None:
    waiting = rig.waiting_route("session-1")
    assert waiting.deadline is not None
    [second] = rig.armer().arm([waiting.deadline])
    rig.work()
    # the same job again under another id (an id rq had forgotten), as a late duplicate
    args = (rig.keys.prefix, HOST, second, DELIVER)
    rig.queue.enqueue(
        JOB_FUNCTION, *args, job_id="again-" + backstop_job_id(rig.keys, HOST, second)
    )
    rig.work()

    assert rig.decisions("session-1") == ["start", "retry", "deadline_reached"]
    assert len(rig.calls()) == 1
    again = rig.result("again-" + backstop_job_id(rig.keys, HOST, second))
    assert (again["fired"], again["dispatched"]) == ([], [])


@pytest.mark.integration
def test_a_backstop_run_before_the_deadline_rearms_the_next_second_instead_of_firing(
    rig: Rig,
) -> None:
    waiting = rig.waiting_route("session-1")
    assert waiting.deadline is not None
    [second] = rig.armer().arm([waiting.deadline])
    # Run the job's body half a second before the deadline (an early rq, a skewed clock).
    early = ManualClock(waiting.deadline - timedelta(milliseconds=500))
    report = fire_backstop(
        rig.connection, rig.queue.name, rig.keys, HOST, second, dispatcher=DELIVER, clock=early
    )
    assert (report.fired, report.early, report.rearmed) == ((), 1, second + 1)
    assert rig.decisions("session-1") == ["start", "retry"]
    assert backstop_job_id(rig.keys, HOST, second + 1) in rig.backstops.scheduled_job_registry

    rig.work()  # both jobs are due for rq now: the first fires, the re-armed one finds nothing
    assert rig.decisions("session-1") == ["start", "retry", "deadline_reached"]
    assert len(rig.calls()) == 1


@pytest.mark.integration
def test_a_host_timer_that_fired_first_leaves_the_backstop_nothing_to_do(rig: Rig) -> None:
    waiting = rig.waiting_route("session-1")
    assert waiting.deadline is not None
    [second] = rig.armer().arm([waiting.deadline])

    async def host_timer() -> RouteSnapshot:
        rig.clock.set(waiting.deadline or rig.clock.now())
        settings = RouteSettings(host_id=HOST)
        async with RouteStore.connect(rig.url, clock=rig.clock, keys=rig.keys) as store:
            return await RouteService(store, rig.clock, settings=settings).fire_due(
                AttemptFence("session-1", 1, 1)
            )

    assert asyncio.run(host_timer()).state == "retrying"
    enqueue_dispatch(
        rig.queue,
        rig.keys,
        AttemptFence("session-1", 1, 1),
        dispatcher=DELIVER,
        now=rig.clock.now(),
    )
    rig.work()

    assert rig.decisions("session-1") == ["start", "retry", "deadline_reached"]
    assert len(rig.calls()) == 1
    result = rig.result(backstop_job_id(rig.keys, HOST, second))
    assert (result["fired"], result["dispatched"], result["early"]) == ([], [], 0)


@pytest.mark.integration
def test_a_backstop_fires_only_the_routes_of_its_own_host(rig: Rig) -> None:
    mine = rig.waiting_route("session-1")
    rig.waiting_route("session-2", host_id="host-1")
    assert mine.deadline is not None
    [second] = rig.armer().arm([mine.deadline])
    rig.work()

    assert rig.decisions("session-1") == ["start", "retry", "deadline_reached"]
    assert rig.decisions("session-2") == ["start", "retry"]
    assert [call["route_id"] for call in rig.calls()] == ["session-1"]
    assert rig.result(backstop_job_id(rig.keys, HOST, second))["fired"] == ["session-1"]


# Ray tier: a real host, killed for good while its route waits


def two_second_retries() -> DynamicProfile:
    return profile(candidate("claude", transient=retries(3, 2, Outcome.SKIP)), candidate("codex"))


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = RecoveryRuntime(
        redis_url=redis_url, key_prefix=f"recovery-bs-{uuid.uuid4().hex[:12]}", host_count=1,
        dispatcher=DELIVER,
    ).start()  # fmt: skip
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(started.key_prefix))


@pytest.mark.integration
@pytest.mark.usefixtures("ray_session")
def test_a_route_whose_host_was_killed_for_good_is_fired_and_dispatched_by_its_backstop(
    runtime: RecoveryRuntime,
) -> None:
    keys = KeySpace(runtime.key_prefix)
    connection = redis.Redis.from_url(runtime.url)
    ledger = DispatchLedger(connection, keys)

    async def scenario() -> RouteSnapshot:
        route = runtime.route("session-1")
        await route.start(two_second_retries(), caller="kanban", invocation_id="inv-1")
        waiting = await route.report_failure(
            1, overloaded(), safe_turn(), caller="kanban", invocation_id="inv-1"
        )
        assert waiting.deadline is not None
        marker = keys.backstop(HOST, math.ceil(waiting.deadline.timestamp()))

        async def armed() -> bool:
            return bool(connection.exists(marker))

        await wait_until(armed, 30.0, redis_url=runtime.url)
        # The owner's keeper would recreate the host (tests/actors/hosting/
        # test_installation.py); here no host comes back, so only the backstop can fire it.
        assert runtime._keeper is not None
        runtime._keeper.stop()
        ray.kill(route.host, no_restart=True)  # its timer dies with it, 2 s before the deadline

        async def delivered() -> bool:
            return ledger.read(AttemptFence("session-1", 1, 1)).fields.get("outcome") == "delivered"

        await wait_until(delivered, 30.0, redis_url=runtime.url)
        second = math.ceil(waiting.deadline.timestamp())
        job_id = backstop_job_id(keys, HOST, second)

        async def backstop_done() -> bool:  # its result is stored after the dispatch it made
            job = Job.fetch(job_id, connection=connection, serializer=JSONSerializer)
            return job.get_status() == "finished"

        await wait_until(backstop_done, 30.0, redis_url=runtime.url)
        return waiting

    try:
        waiting = asyncio.run(scenario())
        assert waiting.deadline is not None
        second = math.ceil(waiting.deadline.timestamp())
        job = Job.fetch(
            backstop_job_id(keys, HOST, second), connection=connection, serializer=JSONSerializer
        )
        result = job.return_value()
        assert result is not None, (job.get_status(), job.latest_result())
        assert result["fired"] == ["session-1"]  # the backstop fired it, not the host
        [call] = connection.lrange(calls_key(runtime.key_prefix), 0, -1)
        assert json.loads(call)["route_id"] == "session-1"
    finally:
        connection.close()
