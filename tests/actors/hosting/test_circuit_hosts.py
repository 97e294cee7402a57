"""Circuit hosts end to end (actors/hosting/circuit_host.py): the circuit actors own every
circuit write of the route hosts, grant the one probe, take its verdict and release each
parked route through its own route host, and keep every guarantee when they are killed:
a circuit host killed while its circuit is open restarts and still lets exactly one probe
go; a release lost with its circuit host is given again by the restarted host; a prober
that never reports loses its lease at the TTL and exactly one new probe goes.

Two route hosts, one circuit host, real Redis and rq workers with the fake dispatcher.
Waits are on Redis (keyspace notifications) or on an actor's answer, with a timeout that
only guards against a hang."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import pytest
import ray
import redis

from actors.engine.settings import OWNER_WAKE_MARGIN_S
from actors.hosting.installation import wait_gone
from actors.hosting.names import NAMESPACE, circuit_host_name
from actors.hosting.runtime import RecoveryRuntime, RouteHandle
from actors.keys import AttemptFence, KeySpace
from actors.store.circuit_store import CircuitStore
from actors.store.installation import read_installation
from circuits import CircuitSettings, CircuitStatus, ProbeGrant, ResourceKey
from tests.actors.circuit_fixtures import hard
from tests.actors.conftest import _delete_prefix
from tests.actors.hosting.test_runtime_circuits import (
    PARK_MARGIN,
    PARKED,
    dispatched,
    park_all,
    spread_routes,
    waits_for_resets,
)
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import overloaded, safe_turn, seed_profile, usage_limit

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

TIMEOUT_S: Final = 60.0
DELIVER: Final = "tests.actors.fake_dispatcher:deliver"
INSTALLATION_KEY: Final = "circuit-hosts-test"
OWNER_MARGIN: Final = timedelta(seconds=OWNER_WAKE_MARGIN_S)


def start_runtime(redis_url: str, *, probe_ttl_s: float = 30) -> RecoveryRuntime:
    return RecoveryRuntime(
        redis_url=redis_url, key_prefix=f"recovery-ch-{uuid.uuid4().hex[:12]}", host_count=2,
        dispatcher=DELIVER, circuit_settings=CircuitSettings(initial_backoff_s=1),
        probe_ttl_s=probe_ttl_s, installation_key=INSTALLATION_KEY,
    ).start()  # fmt: skip


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = start_runtime(redis_url)
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(started.key_prefix))


def circuit_host(runtime: RecoveryRuntime) -> Any:
    return ray.get_actor(circuit_host_name(runtime.key_prefix, 0), namespace=NAMESPACE)


def fleet(runtime: RecoveryRuntime) -> list[RouteHandle]:
    routes = [runtime.route(route_id) for route_id in spread_routes(runtime)]
    assert {runtime.host_index(r.route_id) for r in routes} == {0, 1}
    return routes


async def wait_dispatches(runtime: RecoveryRuntime, connection: redis.Redis, count: int) -> None:
    async def enough() -> bool:
        return len(dispatched(connection, runtime.key_prefix)) >= count

    await wait_until(enough, TIMEOUT_S, redis_url=runtime.url)


async def the_probe(
    runtime: RecoveryRuntime, connection: redis.Redis, routes: list[RouteHandle], probes: int = 1
) -> RouteHandle:
    """Wait for the `probes`-th dispatch: it must be the one probe while the others wait."""
    await wait_dispatches(runtime, connection, probes)
    calls = dispatched(connection, runtime.key_prefix)
    assert len(calls) == probes, calls
    probe = runtime.route(calls[-1]["route_id"])
    snapshot = await probe.snapshot()
    assert (snapshot.state, snapshot.probe_token is not None) == ("retrying", True)
    probed = {c["route_id"] for c in calls}
    waiting = [await r.snapshot() for r in routes if r.route_id not in probed]
    assert {(s.state, s.reason) for s in waiting} <= PARKED
    return probe


async def release_and_drain(
    runtime: RecoveryRuntime, connection: redis.Redis, probe: RouteHandle, routes: list[Any]
) -> None:
    """The probe's success releases the others; every route is then dispatched."""
    await probe.report_success((await probe.snapshot()).generation)

    async def all_dispatched() -> bool:
        calls = dispatched(connection, runtime.key_prefix)
        return len({c["route_id"] for c in calls}) == len(routes)

    await wait_until(all_dispatched, TIMEOUT_S, redis_url=runtime.url)


async def restarted(host: Any, before: int) -> None:
    """Wait until the actor answers from a new process (ray.kill returns at once; a call
    may still reach the old one)."""
    deadline = time.monotonic() + TIMEOUT_S
    while await host.process_id.remote() == before:
        assert time.monotonic() < deadline, "the circuit host did not restart"


def once_each(connection: redis.Redis, prefix: str) -> Counter[tuple[str, int, int]]:
    calls = dispatched(connection, prefix)
    attempts = Counter((c["route_id"], c["generation"], c["ordinal"]) for c in calls)
    assert set(attempts.values()) == {1}, attempts  # every attempt at most once
    return attempts


async def the_circuit(runtime: RecoveryRuntime, routes: list[RouteHandle]) -> Any:
    """The circuit the fleet waits on, read from Redis."""
    snapshot = await routes[0].snapshot()
    async with CircuitStore.connect(runtime.url, keys=KeySpace(runtime.key_prefix)) as store:
        for view in await store.all_circuits():
            if view.resource_id == snapshot.circuit:
                return view
    raise AssertionError(f"no circuit {snapshot.circuit}")


def test_the_circuit_host_is_named_recorded_owns_the_writes_and_releases_through_each_routes_host(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    routes = fleet(runtime)
    record = read_installation(connection, KeySpace(runtime.key_prefix))
    assert record is not None
    assert record.circuit_host_names == (circuit_host_name(runtime.key_prefix, 0),)
    host = circuit_host(runtime)
    assert ray.get(host.deliveries.remote()) == (0, 0)

    async def scenario() -> None:
        reset = datetime.now(UTC).replace(microsecond=0) + PARK_MARGIN
        await park_all(routes, reset)
        parked = await the_circuit(runtime, routes)
        assert parked.status is CircuitStatus.OPEN
        assert parked.parked == len(routes)  # parked by the circuit host's writes
        probe = await the_probe(runtime, connection, routes)
        await release_and_drain(runtime, connection, probe, routes)
        keys = KeySpace(runtime.key_prefix)
        async with CircuitStore.connect(runtime.url, keys=keys) as store:
            closed = await store.view(parked.resource)
        assert closed.status is CircuitStatus.CLOSED

    asyncio.run(scenario())
    once_each(connection, runtime.key_prefix)
    # both route hosts had parked routes: each was told of its own, a wave at a time
    # (five released routes, a budget of one a wave)
    delivered, _ = ray.get(host.deliveries.remote())
    assert delivered == 5
    assert ray.get(host.release_waves.remote())[0] == 5


def releases_and_ledgers(
    connection: redis.Redis, prefix: str
) -> list[tuple[datetime, str, datetime]]:
    """Each released route's release write and its dispatch ledger's `queued_at`, in
    release order (the events stream and the ledgers, as redis-cli shows them)."""
    keys = KeySpace(prefix)
    calls = dispatched(connection, prefix)
    attempts = {
        c["route_id"]: AttemptFence(c["route_id"], c["generation"], c["ordinal"]) for c in calls
    }
    events: list[Any] = connection.xrange(keys.events)  # type: ignore[assignment]  # a bytes client
    found = []
    for _, raw in events:
        fields = {key.decode(): value.decode() for key, value in raw.items()}
        if fields.get("cause") != "circuit_release":
            continue
        queued: Any = connection.hget(keys.dispatch(attempts[fields["route_id"]]), "queued_at")
        assert queued is not None, fields["route_id"]
        written = datetime.fromisoformat(fields["updated_at"])
        found.append((written, fields["route_id"], datetime.fromisoformat(queued.decode())))
    return sorted(found)


def test_the_release_is_paced_no_wave_is_given_before_the_last_reached_the_dispatcher(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    """Waves of one route here (a fifth of five): each released route's slot is written
    only once the route released before it was handed to the dispatcher."""
    routes = fleet(runtime)

    async def scenario() -> None:
        reset = datetime.now(UTC).replace(microsecond=0) + PARK_MARGIN
        await park_all(routes, reset)
        probe = await the_probe(runtime, connection, routes)
        await release_and_drain(runtime, connection, probe, routes)

    asyncio.run(scenario())
    once_each(connection, runtime.key_prefix)
    released = releases_and_ledgers(connection, runtime.key_prefix)
    assert len(released) == len(routes) - 1  # all but the probe, each once
    for (_, _, queued), (written, _, _) in itertools.pairwise(released):
        assert queued <= written


def test_a_circuit_host_killed_in_the_middle_of_a_release_goes_on_with_the_routes_left(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    routes = fleet(runtime)
    host = circuit_host(runtime)

    async def scenario() -> None:
        reset = datetime.now(UTC).replace(microsecond=0) + PARK_MARGIN
        await park_all(routes, reset)
        parked = await the_circuit(runtime, routes)
        probe = await the_probe(runtime, connection, routes)
        await probe.report_success((await probe.snapshot()).generation)
        await wait_dispatches(runtime, connection, 3)  # the probe and two waves
        before = await host.process_id.remote()
        ray.kill(host, no_restart=False)
        await restarted(host, before)
        await host.ready.remote()

        async def all_dispatched() -> bool:
            calls = dispatched(connection, runtime.key_prefix)
            return len({c["route_id"] for c in calls}) == len(routes)

        await wait_until(all_dispatched, TIMEOUT_S, redis_url=runtime.url)
        assert datetime.now(UTC) < reset + OWNER_MARGIN  # released, not their own deadline
        async with CircuitStore.connect(runtime.url, keys=KeySpace(runtime.key_prefix)) as store:
            closed = await store.view(parked.resource)
        assert (closed.status, closed.parked) == (CircuitStatus.CLOSED, 0)

    asyncio.run(scenario())
    once_each(connection, runtime.key_prefix)


def test_at_the_probe_time_the_circuit_host_wakes_one_parked_route_and_the_others_sleep_on(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    """The other parked routes are not woken to park again behind the lease: their own
    deadlines are the owner's margin past the probe time, and only the probe moved."""
    routes = fleet(runtime)
    host = circuit_host(runtime)

    async def scenario() -> None:
        reset = datetime.now(UTC).replace(microsecond=0) + PARK_MARGIN
        await park_all(routes, reset)
        parked = {r.route_id: (await r.snapshot()).deadline for r in routes}
        assert all(d is not None and d >= reset + OWNER_MARGIN for d in parked.values())
        probe = await the_probe(runtime, connection, routes)
        assert datetime.now(UTC) < reset + OWNER_MARGIN  # woken, not its own deadline
        woken, watched = await host.probe_wakes.remote()
        assert (woken, watched) == (1, 1)
        for route in routes:
            if route.route_id == probe.route_id:
                continue
            assert (await route.snapshot()).deadline == parked[route.route_id]
            assert [a.decision for a in await route.history()].count("park") == 0
        await release_and_drain(runtime, connection, probe, routes)
        assert await host.probe_wakes.remote() == (1, 0)  # closed: no longer watched

    asyncio.run(scenario())
    once_each(connection, runtime.key_prefix)


def test_a_circuit_host_killed_while_its_circuit_is_open_restarts_and_still_probes_once(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    routes = fleet(runtime)
    host = circuit_host(runtime)
    before = ray.get(host.process_id.remote())

    async def scenario() -> None:
        reset = datetime.now(UTC).replace(microsecond=0) + PARK_MARGIN
        await park_all(routes, reset)
        ray.kill(host, no_restart=False)  # Ray restarts it; it rehydrates from Redis
        await restarted(host, before)
        assert await host.ready.remote() >= 1  # it owns the open circuit again
        probe = await the_probe(runtime, connection, routes)
        await release_and_drain(runtime, connection, probe, routes)

    asyncio.run(scenario())
    once_each(connection, runtime.key_prefix)


def test_a_release_lost_with_its_circuit_host_is_given_again_by_the_restarted_host(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    routes = fleet(runtime)
    host = circuit_host(runtime)

    async def scenario() -> None:
        # the routes' own reset is far: only a release can send them soon
        reset = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=50)
        await park_all(routes, reset)
        view = await the_circuit(runtime, routes)
        assert view.parked == len(routes)
        # a circuit host that closed the circuit and died before telling anyone: the
        # close is written (as its Lua would), the release never delivered
        async with CircuitStore.connect(runtime.url, keys=KeySpace(runtime.key_prefix)) as store:
            after = (view.open_until or datetime.now(UTC)) + timedelta(seconds=1)
            grant = await store.acquire_probe(view.resource, "lost-host", after, 30)
            assert isinstance(grant, ProbeGrant)
            closed = await store.report_probe(view.resource, grant.owner_token, True, after)
            assert closed.accepted
            assert closed.view.status is CircuitStatus.CLOSED
        before = await host.process_id.remote()
        ray.kill(host, no_restart=False)
        await restarted(host, before)
        await host.ready.remote()

        async def all_dispatched() -> bool:
            calls = dispatched(connection, runtime.key_prefix)
            return len({c["route_id"] for c in calls}) == len(routes)

        await wait_until(all_dispatched, TIMEOUT_S, redis_url=runtime.url)
        assert datetime.now(UTC) < reset  # released, not sent at their own deadline

    asyncio.run(scenario())
    once_each(connection, runtime.key_prefix)


def test_a_prober_that_never_reports_loses_its_lease_at_the_ttl_and_exactly_one_new_probe_goes(
    redis_url: str, connection: redis.Redis
) -> None:
    runtime = start_runtime(redis_url, probe_ttl_s=3)
    try:
        routes = fleet(runtime)

        async def scenario() -> None:
            reset = datetime.now(UTC).replace(microsecond=0) + PARK_MARGIN
            await park_all(routes, reset)
            silent = await the_probe(runtime, connection, routes)  # it never reports
            second = await the_probe(runtime, connection, routes, probes=2)
            assert second.route_id != silent.route_id
            await release_and_drain(runtime, connection, second, routes)

        asyncio.run(scenario())
        once_each(connection, runtime.key_prefix)
    finally:
        runtime.shutdown()
        _delete_prefix(redis_url, KeySpace(runtime.key_prefix))


RACED: Final = 20


def _race_directly(job: dict[str, Any], start: Any, out: Any) -> None:
    """Another OS process of the installation writing circuits itself (as an rq job does):
    it asks for the lease of every circuit at once, released with the circuit host's
    caller by a barrier."""

    async def race() -> list[str]:
        async with CircuitStore.connect(job["url"], keys=KeySpace(job["prefix"])) as store:
            resources = [ResourceKey.model_validate_json(r) for r in job["resources"]]
            when = datetime.fromisoformat(job["now"])
            await asyncio.to_thread(start.wait, TIMEOUT_S)
            found = await asyncio.gather(
                *(store.acquire_probe(r, "job-process", when, 30) for r in resources)
            )
            return [r.kind for r in found]

    out.put(asyncio.run(race()))


def test_a_circuit_host_and_another_process_never_both_hold_a_probe_lease(
    runtime: RecoveryRuntime,
) -> None:
    """Two processes of one installation: the circuit host (Ray) and a process writing
    circuits directly race for the leases of 20 expired circuits; each has one holder."""
    keys = KeySpace(runtime.key_prefix)
    resources = [ResourceKey(provider=f"relay-{n}") for n in range(RACED)]

    async def open_all() -> datetime:
        latest = datetime.now(UTC)
        async with CircuitStore.connect(runtime.url, keys=keys) as store:
            for resource in resources:
                opened = await store.record_failure(resource, hard(), "route-a", latest)
                assert opened.open_until is not None
                latest = max(latest, opened.open_until)
        return latest + timedelta(seconds=1)

    now = asyncio.run(open_all())
    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(2), context.Queue()
    job = {
        "url": runtime.url, "prefix": runtime.key_prefix, "now": now.isoformat(),
        "resources": [r.model_dump_json() for r in resources],
    }  # fmt: skip
    other = context.Process(target=_race_directly, args=(job, start, out))
    other.start()
    host = circuit_host(runtime)
    try:
        start.wait(TIMEOUT_S)
        ours = ray.get([host.acquire_probe.remote(r, "circuit-host", now, 30) for r in resources])
        theirs = out.get(timeout=TIMEOUT_S)
    finally:
        other.join(timeout=TIMEOUT_S)
    ours_granted = [isinstance(result, ProbeGrant) for result in ours]
    theirs_granted = [kind == "granted" for kind in theirs]
    assert len(theirs_granted) == RACED
    assert [a + b for a, b in zip(ours_granted, theirs_granted, strict=True)] == [1] * RACED


def test_circuit_writes_a_dead_circuit_host_could_not_take_are_sent_again_once_it_is_back(
    runtime: RecoveryRuntime,
) -> None:
    """The circuit host is gone for good (killed, no restart, the keeper paused): a usage
    limit's circuit opening cannot be delivered. It is not lost: once the keeper has
    recreated the host, the route host's redelivery writes it."""
    assert runtime._keeper is not None
    runtime._keeper.stop()  # nothing recreates the host until the test heals it
    ray.kill(circuit_host(runtime), no_restart=True)
    wait_gone(circuit_host_name(runtime.key_prefix, 0))
    route = runtime.route("session-redelivered")
    keys = KeySpace(runtime.key_prefix)

    async def report() -> None:
        reset = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=30)
        invocation = "inv-redelivered"
        await route.start(waits_for_resets(), caller="kanban", invocation_id=invocation)
        waiting = await route.report_failure(
            1, usage_limit(reset), safe_turn(), caller="kanban", invocation_id=invocation
        )
        assert waiting.state == "waiting_for_reset"  # its own reset wait: durable already
        async with CircuitStore.connect(runtime.url, keys=keys) as store:
            assert await store.all_circuits() == []  # the opening was not delivered

    asyncio.run(report())
    runtime._heal()  # what the keeper's next round does: the circuit host is back

    async def opened() -> bool:
        async with CircuitStore.connect(runtime.url, keys=keys) as store:
            return any(v.status is CircuitStatus.OPEN for v in await store.all_circuits())

    asyncio.run(wait_until(opened, TIMEOUT_S, redis_url=runtime.url))


def test_a_report_answered_before_its_circuit_round_lands_is_counted_by_the_next_one(
    redis_url: str,
) -> None:
    """From outside, through route handles, a route host and its circuit host: the first
    report's circuit round is sent after its answer, and the next report of the same host
    still plans with that failure counted (two from two routes open the circuit)."""
    runtime = RecoveryRuntime(
        redis_url=redis_url, key_prefix=f"recovery-ch-{uuid.uuid4().hex[:12]}", host_count=2,
        circuit_settings=CircuitSettings(reset_jitter_s=0, transient_threshold=2),
        installation_key=INSTALLATION_KEY,
    ).start()  # fmt: skip
    try:
        host_zero = [r for r in spread_routes(runtime) if runtime.host_index(r) == 0][:2]
        first, second = (runtime.route(route_id) for route_id in host_zero)

        async def report_both() -> tuple[Any, Any]:
            for route in (first, second):
                await route.start(seed_profile(), caller="kanban", invocation_id="inv")
            answers = []
            for route in (first, second):  # one after the other, as soon as answered
                answers.append(await route.report_failure(
                    1, overloaded(), safe_turn(), caller="kanban", invocation_id="inv"
                ))  # fmt: skip
            return answers[0], answers[1]

        one, two = asyncio.run(report_both())
        assert (one.state, one.circuit) == ("retry_wait", None)
        assert two.reason is not None
        assert "is open until" in two.reason  # the first failure counted: it opened
        assert (two.generation, two.candidate_id) == (2, "codex")
    finally:
        runtime.shutdown()
        _delete_prefix(redis_url, KeySpace(runtime.key_prefix))
