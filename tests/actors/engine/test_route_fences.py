"""The attempt-ordinal fence and failed writes. Each test runs on fakeredis (unit tier)
and on the session's real Redis (integration tier)."""

from __future__ import annotations

import asyncio
import pickle
import socket

import pytest

from actors.clock import ManualClock
from actors.engine.service import RouteService
from actors.errors import StaleOrdinalError, StoreUnavailableError
from actors.keys import AttemptFence
from actors.routes.commands import FireDue, RouteContext
from actors.routes.plan import plan
from actors.store.route_store import RouteStore
from tests.actors.conftest import Backend, raw_state
from tests.actors.route_builders import T0, deadline_reached, in_seconds, retry_wait, start
from tests.actors.route_scenarios import Session, overloaded, seed_profile


def test_a_transition_fenced_on_another_attempt_ordinal_is_rejected_with_no_effect(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5), ordinal=2))
            before = await raw_state(client, store.keys, "route-1")
            late = deadline_reached("route-1", 1).model_copy(update={"expected_ordinal": 1})
            with pytest.raises(StaleOrdinalError) as caught:
                await store.apply(late)
            assert await raw_state(client, store.keys, "route-1") == before
            error = caught.value
            assert (error.expected, error.actual, error.actual_generation) == (1, 2, 1)
            assert error.actual_state == "retry_wait"
            assert vars(pickle.loads(pickle.dumps(error))) == vars(error)
            current = deadline_reached("route-1", 1, ordinal=2)
            fired = await store.apply(current.model_copy(update={"expected_ordinal": 2}))
            assert fired.state == "retrying"
        await client.aclose()

    asyncio.run(scenario())


def test_a_timer_planned_before_another_writer_moved_on_is_refused_by_redis(
    backend: Backend,
) -> None:
    """Generation and state come back the same after a retry fires and fails again; the
    attempt ordinal does not, so a stale plan cannot fire the next retry early."""

    async def scenario() -> None:
        async with backend.store() as store:
            service = RouteService(store, backend.clock)
            session = Session(service, backend.clock, "route-1")
            await session.start()
            first = await session.fail(overloaded())
            assert first.deadline is not None
            backend.clock.set(first.deadline)
            stale_plan = plan(first, FireDue(1, 1), RouteContext(backend.clock.now()))
            assert stale_plan is not None
            await session.fire()
            second = await session.fail(overloaded())  # retry_wait again, generation 1
            assert (second.state, second.generation, second.attempt_ordinal) == (
                "retry_wait", 1, 2
            )  # fmt: skip
            with pytest.raises(StaleOrdinalError):
                await store.apply(stale_plan)
            assert await store.snapshot("route-1") == second

    asyncio.run(scenario())


def test_a_failed_write_schedules_nothing_and_raises_a_clear_error(backend: Backend) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            service = RouteService(store, backend.clock)
            session = Session(service, backend.clock, "route-1")
            await session.start()
            await client.delete(store.keys.attempts("route-1"))
            await client.set(store.keys.attempts("route-1"), "not a list")  # script refuses
            with pytest.raises(StoreUnavailableError) as caught:
                await session.fail(overloaded())
            assert "WRONGTYPE" in caught.value.detail
            assert (await service.snapshot("route-1")).state == "active"
            assert await service.schedules() == []
            assert await service.fire_due_schedules() == []
            assert len(service.locks) == 0
        await client.aclose()

    asyncio.run(scenario())


@pytest.mark.integration
def test_a_service_whose_redis_is_unreachable_raises_store_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def scenario() -> None:
        clock = ManualClock(T0)
        url = f"redis://127.0.0.1:{port}/0"
        async with RouteStore.connect(url, clock=clock, timeout_s=2.0) as store:
            service = RouteService(store, clock)
            with pytest.raises(StoreUnavailableError):
                await service.start("route-1", seed_profile(), caller="kanban", invocation_id="i")
            with pytest.raises(StoreUnavailableError):
                await service.fire_due(AttemptFence("route-1", 1, 1))

    asyncio.run(scenario())
