"""One settings value, whoever writes: a host, a backstop job and a dispatch job each write
with every setting of the installation, not with defaults (integration tier: real Redis,
an in-process host, jobs run by an in-process rq worker)."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Final

import pytest
import redis

from actors.clock import ManualClock, SystemClock
from actors.engine.service import RouteService
from actors.engine.settings import EngineSettings
from actors.hosting.route_host import RouteHost
from actors.jobs.backstop import fire_backstop
from actors.jobs.queue import dispatch_queue, enqueue_dispatch
from actors.jobs.worker_engine import worker_engine
from actors.keys import KeySpace
from actors.routes.circuit_board import candidate_key, covering
from actors.routes.circuit_models import CircuitView
from actors.routes.commands import Close, Start
from actors.routes.models import RouteSnapshot
from actors.store.route_store import RouteStore
from circuits import CircuitSettings, CircuitStatus
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.dispatch_rig import DELIVER, REFUSE, Rig
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = pytest.mark.integration

HOST = "host-0"
UTILITY_TTL_S = 555


def configured(prefix: str) -> EngineSettings:
    """Every setting away from its default."""
    return EngineSettings(
        key_prefix=prefix, closed_ttl_s=777, utility_ttl_s=UTILITY_TTL_S, events_maxlen=50,
        circuit_settings=CircuitSettings(
            transient_threshold=2, transient_window_s=30, min_distinct_routes=1,
            initial_backoff_s=7, max_backoff_s=70,
        ),
        probe_ttl_s=33, installation_key="installation-under-test", dispatcher=DELIVER,
        queue_name=f"{prefix}-queue",
    )  # fmt: skip


def quick() -> DynamicProfile:
    return profile(candidate("claude", transient=retries(3, 2, Outcome.STOP)))


def assert_writes_with(service: RouteService, settings: EngineSettings) -> None:
    """The writer's own settings: route TTLs, event retention, circuits, prefix."""
    assert service.settings == settings.route_settings(HOST)
    assert service.store.events_maxlen == settings.events_maxlen
    assert service.store.keys == settings.keys
    assert service.circuits is not None
    assert service.circuits.binding == settings.circuit_binding()


def route_ttl(connection: redis.Redis, keys: KeySpace, route_id: str) -> int:
    return int(connection.ttl(keys.route(route_id)))


PREFILLED_EVENTS: Final = 300
# XADD MAXLEN ~ trims whole stream nodes (100 entries each by default): at most one
# node's worth above the configured 50, far below the 300 a default retention keeps.
TRIMMED_AT_MOST: Final = 50 + 100


def prefill_events(connection: redis.Redis, keys: KeySpace) -> None:
    pipe = connection.pipeline(transaction=False)
    for n in range(PREFILLED_EVENTS):
        pipe.xadd(keys.events, {"filler": str(n)})
    pipe.execute()


@pytest.fixture
def settings(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[EngineSettings]:
    chosen = configured(f"recovery-settings-{uuid.uuid4().hex[:12]}")
    for name, value in chosen.to_environment().items():  # what a runtime hands its workers
        monkeypatch.setenv(name, value)
    yield chosen
    _delete_prefix(redis_url, chosen.keys)


def test_a_host_writes_with_every_setting(redis_url: str, settings: EngineSettings) -> None:
    connection = redis.Redis.from_url(redis_url)
    prefill_events(connection, settings.keys)

    async def scenario() -> RouteSnapshot:
        host = RouteHost(HOST, redis_url, settings)
        await host.ready()
        try:
            assert_writes_with(host._service, settings)
            [started] = await host.run_batch([("u-host", Start(quick(), "utility", "inv-1"))])
            assert isinstance(started, RouteSnapshot), started
            assert 0 < route_ttl(connection, settings.keys, "u-host") <= UTILITY_TTL_S
            assert int(connection.xlen(settings.keys.events)) <= TRIMMED_AT_MOST
            start = Start(quick(), "kanban", "inv-2")
            _, closed = await host.run_batch([("k-host", start), ("k-host", Close(1))])
            assert isinstance(closed, RouteSnapshot), closed
            return closed
        finally:
            await host.aclose()

    assert asyncio.run(scenario()).state == "closed"
    assert 0 < route_ttl(connection, settings.keys, "k-host") <= settings.closed_ttl_s


def retrying_utility_route(redis_url: str, settings: EngineSettings, route_id: str) -> None:
    """A utility route retrying attempt (1, 1), written under the configured settings."""

    async def scenario() -> None:
        clock = ManualClock(SystemClock().now())
        async with RouteStore.connect(redis_url, clock=clock, keys=settings.keys) as store:
            service = RouteService(store, clock, settings=settings.route_settings(HOST))
            await service.start(route_id, quick(), caller="utility", invocation_id="inv-1")
            waiting = await service.report_failure(
                route_id, 1, overloaded(), safe_turn(), caller="utility", invocation_id="inv-1"
            )
            assert waiting.deadline is not None
            clock.advance(waiting.deadline - clock.now())
            fired = await service.fire_due(waiting.attempt)
            assert fired.state == "retrying"

    asyncio.run(scenario())


def retrying_on_configured_queue(redis_url: str, settings: EngineSettings, route_id: str) -> Rig:
    """A retrying utility route, and the rig of the installation's own dispatch queue."""
    connection = redis.Redis.from_url(redis_url)
    rig = Rig(connection, dispatch_queue(connection, str(settings.queue_name)), settings.keys)
    retrying_utility_route(redis_url, settings, route_id)
    return rig


def test_a_dispatch_job_and_a_backstop_job_write_with_every_setting(
    redis_url: str, settings: EngineSettings
) -> None:
    rig = retrying_on_configured_queue(redis_url, settings, "u-job")
    connection, queue, keys = rig.connection, rig.queue, rig.keys

    # The dispatch job: nothing sent, so the same attempt waits for its redelivery.
    now = SystemClock().now()
    attempt = rig.route("u-job").attempt
    enqueue_dispatch(queue, keys, attempt, dispatcher=REFUSE, now=now, host_id=HOST)
    rig.work()
    engine = worker_engine(connection, keys)
    assert engine.settings == settings
    assert_writes_with(engine.service(HOST), settings)
    waiting = rig.route("u-job")
    assert (waiting.state, waiting.attempt_ordinal, waiting.redeliveries) == ("retry_wait", 1, 1)
    assert waiting.deadline is not None
    until_deadline = (waiting.deadline - SystemClock().now()).total_seconds()
    assert 0 < route_ttl(connection, keys, "u-job") <= UTILITY_TTL_S + math.ceil(until_deadline)

    # The backstop job: it fires the new wait at its deadline.
    at_deadline = ManualClock(waiting.deadline + timedelta(milliseconds=1))
    second = math.ceil(waiting.deadline.timestamp())
    report = fire_backstop(
        connection, queue.name, keys, HOST, second, dispatcher=DELIVER, clock=at_deadline
    )
    assert report.fired == ("u-job",)
    assert_writes_with(worker_engine(connection, keys, clock=at_deadline).service(HOST), settings)
    assert rig.route("u-job").state == "retrying"
    assert 0 < route_ttl(connection, keys, "u-job") <= UTILITY_TTL_S
    queue.delete(delete_jobs=True)


def open_circuits(connection: redis.Redis, keys: KeySpace, at: datetime) -> list[CircuitView]:
    """Two routes of the installation fail once each at `at` (a worker engine writing with
    the configured settings): 2 >= the configured threshold, under the default's 3. The
    routes are closed then, so only the circuit stays."""
    opener = worker_engine(connection, keys, clock=ManualClock(at))
    service = opener.service(HOST)
    for route_id in ("opener-1", "opener-2"):
        opener.run(service.start(route_id, quick(), caller="utility", invocation_id="inv-o"))
        opener.run(service.report_failure(
            route_id, 1, overloaded(), safe_turn(), caller="utility", invocation_id="inv-o"
        ))  # fmt: skip
    for route_id in ("opener-1", "opener-2"):  # their waits are not this test's
        opener.run(service.close(route_id, 1))
    views = opener.run(opener.effects.circuits.all_circuits())
    return [view for view in views if view.state.status is CircuitStatus.OPEN]


def test_jobs_park_on_and_probe_circuits_of_the_configured_key_backoff_and_probe_ttl(
    redis_url: str, settings: EngineSettings
) -> None:
    rig = retrying_on_configured_queue(redis_url, settings, "u-circuit")
    connection, queue, keys = rig.connection, rig.queue, rig.keys
    began = SystemClock().now()
    [circuit] = open_circuits(connection, keys, began)
    backoff = settings.circuit_settings.initial_backoff_s
    assert circuit.open_until == began + timedelta(seconds=backoff)
    route_key = candidate_key(rig.route("u-circuit"), settings.circuit_binding())
    assert route_key is not None
    assert circuit.resource_id in {rid for rid, _ in covering(route_key)}

    # The dispatch job: nothing sent, re-planned on the open circuit: parked until it
    # may be probed, its retention the configured one.
    prefill_events(connection, keys)
    attempt = rig.route("u-circuit").attempt
    enqueue_dispatch(queue, keys, attempt, dispatcher=REFUSE, now=began, host_id=HOST)
    rig.work()
    parked = rig.route("u-circuit")
    assert (parked.state, parked.circuit) == ("retry_wait", circuit.resource_id), parked
    assert parked.deadline is not None
    assert parked.deadline >= circuit.open_until
    assert int(connection.xlen(keys.events)) <= TRIMMED_AT_MOST

    # The backstop job at the parked deadline: the circuit may be probed, and this
    # attempt takes the probe lease for the configured probe TTL.
    prefill_events(connection, keys)
    at_deadline = ManualClock(parked.deadline + timedelta(milliseconds=1))
    second = math.ceil(parked.deadline.timestamp())
    report = fire_backstop(
        connection, queue.name, keys, HOST, second, dispatcher=DELIVER, clock=at_deadline
    )
    assert report.fired == ("u-circuit",)
    probing = rig.route("u-circuit")
    assert probing.state == "retrying", probing
    assert probing.probe_token is not None, probing
    engine = worker_engine(connection, keys, clock=at_deadline)
    [view] = [
        v for v in engine.run(engine.effects.circuits.all_circuits())
        if v.resource_id == circuit.resource_id
    ]  # fmt: skip
    assert view.state.lease is not None
    assert view.state.lease.expires_at == at_deadline.now() + timedelta(
        seconds=settings.probe_ttl_s
    )
    assert int(connection.xlen(keys.events)) <= TRIMMED_AT_MOST
    queue.delete(delete_jobs=True)
