"""The route store's transitions: fenced, atomic, readable. Each test runs on fakeredis
(unit tier) and on the session's real Redis (integration tier)."""

from __future__ import annotations

import asyncio

import pytest
from fakeredis.aioredis import FakeRedis

from actors.errors import InvalidStateError, StaleGenerationError
from actors.routes.models import RouteSnapshot
from actors.store.route_store import RouteStore
from tests.actors.conftest import Backend, raw_state
from tests.actors.route_builders import (
    close,
    deadline_reached,
    expected_snapshot,
    in_seconds,
    policy,
    retry_wait,
    skip_now,
    start,
)


def test_a_route_never_written_reads_as_none_at_generation_0(backend: Backend) -> None:
    async def scenario() -> RouteSnapshot:
        async with backend.store() as store:
            assert await store.history("route-1") == []
            return await store.snapshot("route-1")

    snapshot = asyncio.run(scenario())
    assert (snapshot.state, snapshot.generation, snapshot.updated_at) == ("none", 0, None)


def test_the_first_transition_creates_generation_1(backend: Backend) -> None:
    async def scenario() -> tuple[RouteSnapshot, RouteSnapshot]:
        async with backend.store() as store:
            applied = await store.apply(start("route-1"))
            return applied, await store.snapshot("route-1")

    applied, read = asyncio.run(scenario())
    assert applied.generation == 1
    assert applied.state == "active"
    assert applied == read == expected_snapshot(start("route-1"))


def test_a_stale_expected_generation_is_rejected_with_no_effect(backend: Backend) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(skip_now("route-1", 1))  # now generation 2
            before = await raw_state(client, store.keys, "route-1")
            with pytest.raises(StaleGenerationError) as caught:
                await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5)))
            assert await raw_state(client, store.keys, "route-1") == before
        await client.aclose()
        error = caught.value
        assert (error.route_id, error.expected, error.actual) == ("route-1", 1, 2)
        assert error.actual_state == "switching"
        assert "expected generation 1, found 2" in str(error)

    asyncio.run(scenario())


def test_a_transition_from_a_disallowed_state_is_rejected_with_no_effect(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1"))
            before = await raw_state(client, store.keys, "route-1")
            with pytest.raises(InvalidStateError) as caught:
                await store.apply(deadline_reached("route-1", 1))  # active has no deadline
            assert await raw_state(client, store.keys, "route-1") == before
        await client.aclose()
        error = caught.value
        assert (error.route_id, error.state, error.actual_generation) == ("route-1", "active", 1)
        assert error.allowed == ("retry_wait", "waiting_for_reset")

    asyncio.run(scenario())


def test_a_route_that_exists_cannot_be_created_again(backend: Backend) -> None:
    async def scenario() -> None:
        async with backend.store() as store:
            await store.apply(start("route-1"))
            with pytest.raises(StaleGenerationError):
                await store.apply(start("route-1"))

    asyncio.run(scenario())


def test_retries_keep_the_generation_and_a_skip_bumps_it(backend: Backend) -> None:
    async def scenario() -> list[int]:
        async with backend.store() as store:
            generations = [(await store.apply(start("route-1"))).generation]
            wait = retry_wait("route-1", 1, deadline=in_seconds(5))
            generations.append((await store.apply(wait)).generation)
            generations.append((await store.apply(skip_now("route-1", 1))).generation)
            return generations

    assert asyncio.run(scenario()) == [1, 1, 2]


def test_attempt_history_is_append_only_and_keeps_the_policy_of_its_moment(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with backend.store() as store:
            await store.apply(start("route-1"))
            first = retry_wait("route-1", 1, deadline=in_seconds(5), interval_s=5)
            await store.apply(first)
            await store.apply(deadline_reached("route-1", 1))
            # The profile was edited in between: the next decision uses the new policy.
            second = retry_wait("route-1", 1, deadline=in_seconds(40), ordinal=2, interval_s=20)
            await store.apply(second)
            history = await store.history("route-1")
            assert [r.decision for r in history] == ["start", "retry", "retry"]
            assert history[1] == first.attempt
            assert history[2] == second.attempt
            assert history[1].policy_snapshot == policy(5)
            assert history[2].policy_snapshot == policy(20)
            assert history[1].catalogue_version == "catalogue.v1"
            assert history[1].rule == "anthropic.http.529.v1"

    asyncio.run(scenario())


def test_each_transition_publishes_an_event_a_board_view_can_render(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with backend.store() as store:
            await store.apply(start("route-1"))
            backend.clock.set(in_seconds(1))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(6)))
            events = await store.events()
            assert [e.state for e in events] == ["active", "retry_wait"]
            assert await store.events(after=events[0].event_id) == events[1:]

        event = events[1]
        assert (event.from_state, event.from_generation) == ("active", 1)
        assert (event.state, event.generation, event.route_id) == ("retry_wait", 1, "route-1")
        assert (event.cause, event.decision) == ("report_failure", "retry")
        assert (event.code, event.error_class, event.rule) == (
            "provider_overloaded", "transient", "anthropic.http.529.v1"
        )  # fmt: skip
        assert (event.retry_ordinal, event.retry_max) == (1, 3)
        assert (event.deadline, event.pending_outcome) == (in_seconds(6), "retry")
        assert (event.caller, event.invocation_id) == ("kanban", "inv-route-1")
        assert (event.candidate_id, event.at) == ("claude", in_seconds(1))

    asyncio.run(scenario())


def test_apply_many_reports_per_item_results_for_a_mix_of_applied_and_stale(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with backend.store() as store:
            await store.apply_many([start("a"), start("b"), start("c")])
            results = await store.apply_many(
                [
                    retry_wait("a", 1, deadline=in_seconds(5)),
                    retry_wait("b", 7, deadline=in_seconds(5)),  # stale
                    skip_now("c", 1),
                    deadline_reached("a", 1),  # sees the first item's effect
                    deadline_reached("c", 1),  # stale: c moved to generation 2
                ]
            )
            a_wait, b_stale, c_skip, a_fired, c_stale = results
            assert isinstance(a_wait, RouteSnapshot)
            assert a_wait.state == "retry_wait"
            assert isinstance(b_stale, StaleGenerationError)
            assert (b_stale.expected, b_stale.actual) == (7, 1)
            assert isinstance(c_skip, RouteSnapshot)
            assert c_skip.generation == 2
            assert isinstance(a_fired, RouteSnapshot)
            assert a_fired.state == "retrying"
            assert isinstance(c_stale, StaleGenerationError)
            assert [(await store.snapshot(r)).state for r in "abc"] == [
                "retrying", "active", "switching"
            ]  # fmt: skip
            assert len(await store.history("b")) == 1

    asyncio.run(scenario())


def test_a_host_index_gains_the_route_and_loses_it_once_closed(backend: Backend) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            index = store.keys.host_routes("host-0")
            await store.apply(start("route-1", host_id="host-0"))
            await store.apply(start("route-2", host_id="host-0"))
            assert await client.smembers(index) == {"route-1", "route-2"}
            await store.apply(close("route-1", 1, host_id="host-0"))
            assert await client.smembers(index) == {"route-2"}
        await client.aclose()

    asyncio.run(scenario())


def test_a_closed_route_expires_and_a_later_transition_without_expiry_persists(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(close("route-1", 1))
            assert 0 < await client.ttl(store.keys.route("route-1")) <= 3600
            assert 0 < await client.ttl(store.keys.attempts("route-1")) <= 3600
            await store.apply(start("route-2"))
            assert await client.ttl(store.keys.route("route-2")) == -1
        await client.aclose()

    asyncio.run(scenario())


def test_the_events_stream_is_trimmed_to_about_its_maximum_length(backend: Backend) -> None:
    async def scenario() -> int:
        client = backend.raw()
        async with backend.store(events_maxlen=10) as store:
            await store.apply_many([start(f"route-{n}") for n in range(500)])
            length: int = await client.xlen(store.keys.events)
        await client.aclose()
        return length

    # MAXLEN ~ trims whole stream nodes (100 entries by default), never below the maximum.
    assert 10 <= asyncio.run(scenario()) <= 200


def test_a_script_flushed_from_redis_is_loaded_again_on_demand(backend: Backend) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            await client.script_flush()
            await store.apply(start("route-1"))
            await client.script_flush()
            results = await store.apply_many([start("route-2"), start("route-1")])
            assert isinstance(results[0], RouteSnapshot)
            assert isinstance(results[1], StaleGenerationError)
            assert len(await store.history("route-1")) == 1
        await client.aclose()

    asyncio.run(scenario())


def test_a_client_without_decoded_responses_reads_the_same_routes(fake_backend: Backend) -> None:
    async def scenario() -> None:
        assert fake_backend.fake_server is not None
        undecoded = FakeRedis(server=fake_backend.fake_server)
        keys, clock = fake_backend.keys, fake_backend.clock
        async with RouteStore(undecoded, clock=clock, keys=keys, owns_client=True) as store:
            applied = await store.apply(start("route-1"))
            results = await store.apply_many([start("route-1")])
            assert isinstance(results[0], StaleGenerationError)
            assert results[0].actual_state == "active"
            assert await store.snapshot("route-1") == applied
            assert [r.decision for r in await store.history("route-1")] == ["start"]
            assert [e.state for e in await store.events()] == ["active"]

    asyncio.run(scenario())


def test_quotes_newlines_and_non_ascii_text_survive_the_script_unchanged(
    backend: Backend,
) -> None:
    reason = 'Usage limit "reached" – réessayez\nà 15 h\\n {"json": [1]} 🙂'

    async def scenario() -> None:
        async with backend.store() as store:
            await store.apply(start("route-1"))
            wait = retry_wait("route-1", 1, deadline=in_seconds(5), reason=reason)
            await store.apply(wait)
            assert (await store.snapshot("route-1")).reason == reason
            assert (await store.history("route-1"))[-1].reason == reason
            assert (await store.events())[-1].reason == reason
            assert (await store.schedules())[0].reason == reason

    asyncio.run(scenario())
