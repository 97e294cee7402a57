"""A circuit owner's paced release (actors/engine/paced_release.py): one wave at a time,
the next planned only once the previous one's routes were handed to the dispatcher (their
dispatch ledgers exist; all but what the next delivery covers, at most half a wave),
each route released once, parked order kept, never more than the
budget in a wave; a release stops when the circuit reopens (the rest stay parked); a
route that never reaches the dispatcher does not hold the release for ever.

The deliver port plays the route hosts: it takes each wave's routes off the parked set
and answers their attempts; the test writes their ledgers, as dispatch enqueues would."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, Final

from actors.engine.paced_release import STALL_S, PacedRelease
from actors.keys import AttemptFence
from actors.routes.circuit_models import CloseCircuit, ReleaseSettings
from actors.store.circuit_store import CircuitStore
from circuits import CircuitStatus, ReleasePlan, ResourceKey
from tests.actors.circuit_fixtures import RESOURCE, hard, open_store
from tests.actors.conftest import Backend

WAIT_S: Final = 10.0  # a guard against a hang only
FAST: Final = ReleaseSettings(wave_interval=timedelta(milliseconds=20))
POLL_S: Final = 0.002


class Hosts:
    """The route hosts' side of a release: each wave delivered is recorded and its routes
    unparked (as `released` does on a route host); `moved` routes answer an attempt."""

    def __init__(self, store: CircuitStore, gone: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.gone = gone  # moved on before their slot: no attempt comes back
        self.waves: list[list[str]] = []
        self.backend: Backend | None = None  # set: each wave's ledgers written at once

    async def __call__(self, resource: ResourceKey, plan: ReleasePlan) -> Sequence[AttemptFence]:
        routes = [slot.route_id for slot in plan.slots]
        self.waves.append(routes)
        for route_id in routes:
            await self.store.unpark(resource, route_id)
        if self.backend is not None:
            await absorb(self.backend, routes)
        return [AttemptFence(r, 1, 1) for r in routes if r not in self.gone]


class Watched(PacedRelease):
    """The release, announcing each count of ledgers it took (tests wait on that)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.looks = 0
        self.looked = asyncio.Condition()

    async def _count(self, fences: Sequence[AttemptFence]) -> int:
        count = await super()._count(fences)
        self.looks += 1
        async with self.looked:
            self.looked.notify_all()
        return count


async def until(release: Watched, condition: Callable[[], bool]) -> None:
    async def waited() -> None:
        async with release.looked:
            await release.looked.wait_for(condition)

    await asyncio.wait_for(waited(), WAIT_S)


async def absorb(backend: Backend, routes: Sequence[str]) -> None:
    """The dispatch enqueue of each route's attempt: its ledger, queued."""
    raw = backend.raw()
    for route_id in routes:
        await raw.hset(backend.keys.dispatch(AttemptFence(route_id, 1, 1)), "state", "queued")
    await raw.aclose()


async def closed_with_parked(store: CircuitStore, backend: Backend, routes: Sequence[str]) -> None:
    await store.record_failure(RESOURCE, hard(), "route-a", backend.clock.now())
    for route_id in routes:
        await store.park(RESOURCE, route_id, backend.clock.now())
    await store.override(RESOURCE, CloseCircuit(), backend.clock.now())


def run(
    backend: Backend,
    scenario: Callable[[CircuitStore, Watched, Hosts], Awaitable[None]],
    gone: frozenset[str] = frozenset(),
) -> None:
    async def body() -> None:
        async with open_store(backend, release=FAST) as store:
            hosts = Hosts(store, gone)
            release = Watched(store, backend.clock, hosts, poll_s=POLL_S)
            try:
                await scenario(store, release, hosts)
            finally:
                release.close()

    asyncio.run(body())


ROUTES: Final = [f"r{i:02d}" for i in range(12)]  # a budget of 2 a wave


def test_a_second_wave_is_not_armed_before_the_first_reached_the_dispatcher(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, release: Watched, hosts: Hosts) -> None:
        await closed_with_parked(store, backend, ROUTES)
        release.start(RESOURCE)
        release.start(RESOURCE)  # a second close while it runs: the same release
        assert len(release) == 1
        await until(release, lambda: release.looks >= 10)
        # the first wave (a quarter interval at the budget's pace: one route), first
        # parked first, and nothing more while it has not reached the dispatcher
        assert hosts.waves == [ROUTES[:1]]
        await absorb(backend, ROUTES[:1])
        await until(release, lambda: len(hosts.waves) == 2)
        assert hosts.waves[1] == ROUTES[1:3]  # then whole intervals: the budget, 2
        await until(release, lambda: release.looks >= 20)
        assert len(hosts.waves) == 2  # the third waits on the second
        await absorb(backend, ROUTES[1:2])  # half a wave: the most the lead may cover
        await until(release, lambda: len(hosts.waves) == 3)

    run(backend, scenario)


def test_every_parked_route_is_released_once_in_parked_order_within_the_budget(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, release: Watched, hosts: Hosts) -> None:
        await closed_with_parked(store, backend, ROUTES)
        hosts.backend = backend  # each wave reaches the dispatcher as it is delivered
        release.start(RESOURCE)
        await asyncio.wait_for(next(iter(release._running.values())), WAIT_S)
        assert [r for wave in hosts.waves for r in wave] == ROUTES
        assert max(len(wave) for wave in hosts.waves) <= 2
        assert await store.parked(RESOURCE) == []
        assert (release.waves, len(release)) == (len(hosts.waves), 0)

    run(backend, scenario)


def test_a_circuit_that_reopens_stops_its_release_and_the_rest_stay_parked(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, release: Watched, hosts: Hosts) -> None:
        await closed_with_parked(store, backend, ROUTES)
        release.start(RESOURCE)
        # Taken now: once the circuit reopens the release may end (and leave `_running`)
        # before this coroutine runs again.
        task = next(iter(release._running.values()))
        await until(release, lambda: len(hosts.waves) == 1)
        await store.record_failure(RESOURCE, hard(), "r00", backend.clock.now())  # reopened
        assert (await store.view(RESOURCE)).status is CircuitStatus.OPEN
        await absorb(backend, ROUTES[:1])
        await asyncio.wait_for(task, WAIT_S)
        assert hosts.waves == [ROUTES[:1]]
        assert await store.parked(RESOURCE) == ROUTES[1:]

    run(backend, scenario)


def test_a_released_route_that_never_reaches_the_dispatcher_does_not_hold_the_release(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, release: Watched, hosts: Hosts) -> None:
        await closed_with_parked(store, backend, ROUTES)
        release.start(RESOURCE)
        # r00 moved on before its slot: no attempt came back, nothing to wait on
        await until(release, lambda: len(hosts.waves) == 2)
        assert hosts.waves == [ROUTES[:1], ROUTES[1:3]]

    run(backend, scenario, gone=frozenset({"r00"}))


def test_a_wave_whose_last_routes_never_reach_the_dispatcher_ends_after_the_stall_time(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, release: Watched, hosts: Hosts) -> None:
        await closed_with_parked(store, backend, ROUTES)
        release.start(RESOURCE)
        # the first wave's host lost its route: its ledger never comes
        await until(release, lambda: release.looks >= 5)
        assert len(hosts.waves) == 1
        backend.clock.advance(timedelta(seconds=STALL_S + 1))
        await until(release, lambda: len(hosts.waves) == 2)
        assert hosts.waves[1] == ROUTES[1:3]

    run(backend, scenario)
