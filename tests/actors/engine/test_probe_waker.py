"""A circuit owner's probe waker (actors/engine/probe_waker.py): at an open circuit's
probe time it wakes ONE parked route, first parked first; a woken route that takes no
lease is followed by the next; a lease that expires with no verdict wakes another; a
closed circuit is no longer watched; a Redis outage is looked through, never lost."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Final

from actors.engine.probe_waker import ProbeWaker
from actors.errors import StoreUnavailableError
from actors.routes.circuit_models import CircuitView
from actors.store.circuit_store import CircuitStore
from circuits import ResourceKey
from tests.actors.circuit_fixtures import RESOURCE, TTL_S, grant_of, hard, open_store
from tests.actors.conftest import Backend

POLL_S: Final = 0.005
WAIT_S: Final = 10.0  # a guard against a hang only


class Wakes:
    """The wake port: records each route woken; a route in `takes` takes the lease (and
    leaves the parked set, as a prober does)."""

    def __init__(self, store: CircuitStore, backend: Backend, takes: set[str]) -> None:
        self.store = store
        self.backend = backend
        self.takes = takes
        self.woken: list[str] = []
        self.tokens: dict[str, str] = {}

    async def __call__(self, resource: ResourceKey, route_id: str) -> bool:
        self.woken.append(route_id)
        if route_id not in self.takes:
            return False
        now = self.backend.clock.now()
        grant = await self.store.acquire_probe(resource, route_id, now, TTL_S)
        self.tokens[route_id] = grant_of(grant).owner_token
        await self.store.unpark(resource, route_id)
        return True


class WatchedWaker(ProbeWaker):
    """The waker, announcing every look it finished (tests wait on that, never poll)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.changed = asyncio.Condition()

    async def _look(self, watched: Any) -> float | None:
        delay = await super()._look(watched)
        async with self.changed:
            self.changed.notify_all()
        return delay


async def until(waker: WatchedWaker, condition: Callable[[], bool]) -> None:
    async def waited() -> None:
        async with waker.changed:
            await waker.changed.wait_for(condition)

    await asyncio.wait_for(waited(), WAIT_S)


async def looks_more(waker: WatchedWaker, count: int) -> None:
    """Let the waker look at its circuits `count` more times."""
    target = waker.looks + count
    await until(waker, lambda: waker.looks >= target)


async def opened_with_parked(store: CircuitStore, backend: Backend, *routes: str) -> datetime:
    """RESOURCE open on a hard failure, `routes` parked on it in order; its open-until."""
    view = await store.record_failure(RESOURCE, hard(), "route-a", backend.clock.now())
    assert view.open_until is not None
    for route_id in routes:
        await store.park(RESOURCE, route_id, backend.clock.now())
    return view.open_until


def run(backend: Backend, takes: set[str], scenario: Callable[..., Awaitable[None]]) -> None:
    async def body() -> None:
        async with open_store(backend) as store:
            wakes = Wakes(store, backend, takes)
            waker = WatchedWaker(store, backend.clock, wakes, poll_s=POLL_S, retry_s=POLL_S)
            try:
                await scenario(store, waker, wakes)
            finally:
                waker.close()

    asyncio.run(body())


def test_an_open_circuit_wakes_only_its_first_parked_route_at_its_probe_time(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, waker: WatchedWaker, wakes: Wakes) -> None:
        open_until = await opened_with_parked(store, backend, "r1", "r2", "r3")
        waker.watch(RESOURCE)
        await looks_more(waker, 3)
        assert wakes.woken == []  # not before its probe time
        backend.clock.set(open_until)
        await until(waker, lambda: wakes.woken != [])
        await looks_more(waker, 3)
        assert wakes.woken == ["r1"]  # the lease is held now: nobody else wakes
        assert len(waker) == 1

    run(backend, {"r1"}, scenario)


def test_a_woken_route_that_takes_no_lease_is_followed_by_the_next_parked_route(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, waker: WatchedWaker, wakes: Wakes) -> None:
        open_until = await opened_with_parked(store, backend, "gone", "r2", "r3")
        backend.clock.set(open_until)
        waker.watch(RESOURCE)
        await until(waker, lambda: "r2" in wakes.tokens)
        await looks_more(waker, 3)
        assert wakes.woken == ["gone", "r2"]

    run(backend, {"r2", "r3"}, scenario)


def test_a_probe_lease_that_expires_with_no_verdict_wakes_the_next_parked_route(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, waker: WatchedWaker, wakes: Wakes) -> None:
        open_until = await opened_with_parked(store, backend, "r1", "r2", "r3")
        backend.clock.set(open_until)
        waker.watch(RESOURCE)
        await until(waker, lambda: "r1" in wakes.tokens)
        view = await store.view(RESOURCE)
        assert view.state.lease is not None
        backend.clock.set(view.state.lease.expires_at)  # the prober went silent
        await until(waker, lambda: "r2" in wakes.tokens)
        await looks_more(waker, 3)
        assert wakes.woken == ["r1", "r2"]

    run(backend, {"r1", "r2", "r3"}, scenario)


def test_a_circuit_closed_by_its_probe_is_no_longer_watched(backend: Backend) -> None:
    async def scenario(store: CircuitStore, waker: WatchedWaker, wakes: Wakes) -> None:
        open_until = await opened_with_parked(store, backend, "r1", "r2")
        backend.clock.set(open_until)
        waker.watch(RESOURCE)
        await until(waker, lambda: "r1" in wakes.tokens)
        await store.report_probe(RESOURCE, wakes.tokens["r1"], True, backend.clock.now())
        waker.watch(RESOURCE)  # the verdict's round tells the waker
        await until(waker, lambda: len(waker) == 0)
        assert wakes.woken == ["r1"]

    run(backend, {"r1"}, scenario)


def test_an_open_circuit_with_nobody_parked_wakes_the_first_route_that_parks_later(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, waker: WatchedWaker, wakes: Wakes) -> None:
        open_until = await opened_with_parked(store, backend)
        backend.clock.set(open_until)
        waker.watch(RESOURCE)
        await looks_more(waker, 3)
        assert wakes.woken == []
        await store.park(RESOURCE, "late", backend.clock.now())
        waker.watch(RESOURCE, if_new=True)  # already watched: the poll finds it
        await until(waker, lambda: "late" in wakes.tokens)

    run(backend, {"late"}, scenario)


def test_a_redis_outage_is_looked_through_and_the_probe_still_woken(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore, waker: WatchedWaker, wakes: Wakes) -> None:
        open_until = await opened_with_parked(store, backend, "r1")
        backend.clock.set(open_until)
        real_view = store.view
        failures = 0

        async def failing_view(resource: ResourceKey) -> CircuitView:
            nonlocal failures
            if failures < 2:
                failures += 1
                raise StoreUnavailableError("view", "connection refused")
            return await real_view(resource)

        store.view = failing_view  # type: ignore[method-assign]  # the outage, then Redis back
        waker.watch(RESOURCE)
        await until(waker, lambda: "r1" in wakes.tokens)
        assert failures == 2

    run(backend, {"r1"}, scenario)
