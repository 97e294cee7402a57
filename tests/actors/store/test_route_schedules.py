"""Pending schedules: a readable hash per waiting route and a sorted set by deadline,
written and cleared in the same script as the route state. Each test runs on fakeredis
(unit tier) and on the session's real Redis (integration tier)."""

from __future__ import annotations

import asyncio
from typing import Any

from actors.keys import KeySpace
from actors.store.route_store import RouteStore
from tests.actors.conftest import Backend, raw_state
from tests.actors.route_builders import deadline_reached, in_seconds, retry_wait, start


def test_a_wait_writes_the_schedule_hash_and_sorted_set_with_the_state(
    backend: Backend,
) -> None:
    async def scenario() -> dict[str, Any]:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5.25)))
            state = await raw_state(client, store.keys, "route-1")
        await client.aclose()
        return state

    state = asyncio.run(scenario())
    assert state["route"]["state"] == "retry_wait"
    assert state["route"]["deadline"] == "2026-03-01T12:00:05.250000Z"
    assert state["schedules"] == [("route-1", in_seconds(5.25).timestamp())]
    assert state["schedule"] == {
        "route": "route-1",
        "generation": "1",
        "state": "retry_wait",
        "deadline": "2026-03-01T12:00:05.250000Z",
        "candidate": "claude",
        "code": "provider_overloaded",
        "class": "transient",
        "ordinal": "1",
        "pending_outcome": "retry",
        "reason": "provider overloaded",
    }


def test_leaving_the_wait_clears_the_schedule_hash_and_sorted_set_together(
    backend: Backend,
) -> None:
    async def scenario() -> dict[str, Any]:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5)))
            await store.apply(deadline_reached("route-1", 1))
            state = await raw_state(client, store.keys, "route-1")
            assert await store.schedules() == []
        await client.aclose()
        return state

    state = asyncio.run(scenario())
    assert state["route"]["state"] == "retrying"
    assert state["route"]["deadline"] == ""
    assert (state["schedule"], state["schedules"]) == ({}, [])


def test_a_new_wait_replaces_the_routes_schedule(backend: Backend) -> None:
    async def scenario() -> list[tuple[str, float]]:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5)))
            await store.apply(deadline_reached("route-1", 1))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(20), ordinal=2))
            entries = await store.schedules()
            assert [(e.ordinal, e.deadline) for e in entries] == [(2, in_seconds(20))]
            raw = await client.zrange(store.keys.schedules, 0, -1, withscores=True)
            scores = [(str(pair[0]), float(pair[1])) for pair in raw]
        await client.aclose()
        return scores

    assert asyncio.run(scenario()) == [("route-1", in_seconds(20).timestamp())]


def test_due_schedules_returns_only_due_entries_in_deadline_order(backend: Backend) -> None:
    async def scenario() -> None:
        async with backend.store() as store:
            for route_id, seconds in [("r-30", 30), ("r-10", 10), ("r-20", 20), ("r-99", 99)]:
                await store.apply(start(route_id))
                await store.apply(retry_wait(route_id, 1, deadline=in_seconds(seconds)))
            due = await store.due_schedules(in_seconds(30), limit=10)
            assert [e.route_id for e in due] == ["r-10", "r-20", "r-30"]
            first_two = await store.due_schedules(in_seconds(30), limit=2)
            assert [e.route_id for e in first_two] == ["r-10", "r-20"]
            assert await store.due_schedules(in_seconds(9.999), limit=10) == []
            everything = await store.schedules()
            assert [e.route_id for e in everything] == ["r-10", "r-20", "r-30", "r-99"]

    asyncio.run(scenario())


def test_a_store_under_another_prefix_sees_none_of_these_routes(backend: Backend) -> None:
    async def scenario() -> None:
        async with backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5)))
        elsewhere = KeySpace(f"{store.keys.prefix}-other")
        other = RouteStore(backend.raw(), clock=backend.clock, keys=elsewhere, owns_client=True)
        async with other:
            assert (await other.snapshot("route-1")).state == "none"
            assert await other.schedules() == []
            assert await other.due_schedules(in_seconds(60), limit=10) == []

    asyncio.run(scenario())


def test_an_expiring_route_keeps_its_schedule_hash_and_entry_in_step(backend: Backend) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1", caller="utility"))
            wait = retry_wait("route-1", 1, deadline=in_seconds(5))
            await store.apply(wait.model_copy(update={"expire_after_s": 600}))
            assert 0 < await client.ttl(store.keys.route("route-1")) <= 600
            # Hash and sorted-set entry only ever change together, in the script.
            assert await client.ttl(store.keys.schedule("route-1")) == -1
            assert [e.route_id for e in await store.schedules()] == ["route-1"]
        await client.aclose()

    asyncio.run(scenario())
