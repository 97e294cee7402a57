"""Across processes the Lua fence decides and the loser re-plans once: a command another
writer overtook between the round's read and its write is planned again against what
the winner wrote, and is rejected only when it no longer applies (or loses twice).
Each test runs on fakeredis (unit tier) and on the session's real Redis (integration)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest

from actors.engine.service import RouteService
from actors.errors import StaleGenerationError, TransitionRejectedError
from actors.store.route_store import RouteStore
from tests.actors.conftest import Backend
from tests.actors.route_scenarios import Session, overloaded

Interleaved = Callable[[], Awaitable[object]]


def overtake_after_reads(store: RouteStore, writes: Sequence[Interleaved]) -> list[int]:
    """Make `store` run the next of `writes` (another process's write) right after each of
    its snapshot reads, until they run out; answers the number of reads seen so far."""
    reads = [0]
    pending = list(writes)
    read = store.read_snapshots

    async def snapshots_then_overtaken(route_ids: Sequence[str]) -> list[object]:
        found = await read(route_ids)
        reads[0] += 1
        if pending:
            await pending.pop(0)()
        return list(found)

    store.read_snapshots = snapshots_then_overtaken  # type: ignore[method-assign,assignment]
    return reads


def test_a_command_overtaken_by_another_writer_is_planned_again_and_takes_effect(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with backend.store() as ours, backend.store() as theirs:
            other = Session(RouteService(theirs, backend.clock), backend.clock, "route-1")
            await other.start()
            reads = overtake_after_reads(ours, [lambda: other.fail(overloaded())])
            stopped = await RouteService(ours, backend.clock).stop("route-1", 1)
            assert reads[0] == 2, "read, lost the fence, read again"
            assert (stopped.state, stopped.generation) == ("action_required", 1)
            assert await other.decisions() == ["start", "retry", "stop"]
            assert await theirs.due_schedules(backend.clock.now(), limit=10) == []

    asyncio.run(scenario())


def test_a_command_the_winner_made_invalid_is_rejected_after_its_one_re_plan(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with backend.store() as ours, backend.store() as theirs:
            service = RouteService(theirs, backend.clock)
            other = Session(service, backend.clock, "route-1")
            await other.start()
            waiting = await other.fail(overloaded())
            reads = overtake_after_reads(ours, [lambda: service.skip_now("route-1", 1)])
            with pytest.raises(StaleGenerationError) as caught:
                await RouteService(ours, backend.clock).cancel_wait("route-1", 1)
            assert reads[0] == 2
            assert caught.value.actual_generation == 2
            assert waiting.state == "retry_wait"
            assert await other.decisions() == ["start", "retry", "skip_now"]

    asyncio.run(scenario())


def test_a_second_loss_stands_and_nothing_of_the_loser_is_written(backend: Backend) -> None:
    async def scenario() -> None:
        async with backend.store() as ours, backend.store() as theirs:
            service = RouteService(theirs, backend.clock)
            other = Session(service, backend.clock, "route-1")
            await other.start()
            reads = overtake_after_reads(
                ours,
                [lambda: other.fail(overloaded()), lambda: service.retry_now("route-1", 1)],
            )
            with pytest.raises(TransitionRejectedError) as caught:
                await RouteService(ours, backend.clock).stop("route-1", 1)
            assert reads[0] == 2, "planned twice, not more"
            assert (caught.value.actual_generation, caught.value.actual_state) == (1, "retrying")
            final = await theirs.snapshot("route-1")
            assert (final.state, final.generation) == ("retrying", 1)
            assert (await other.decisions())[-1] != "stop"

    asyncio.run(scenario())
