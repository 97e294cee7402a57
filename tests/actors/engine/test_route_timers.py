"""A route host's in-process timers, on a plain asyncio loop with a scripted clock: no
Ray, no Redis, no sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

from actors.engine.timers import Due, RouteTimers
from actors.errors import StoreUnavailableError
from actors.keys import AttemptFence
from actors.routes.models import RouteSnapshot
from tests.actors.route_builders import T0

DEADLINE = T0 + timedelta(seconds=5)


class ScriptedClock:
    """Returns the given instants in turn, then the last one forever."""

    def __init__(self, *instants: datetime) -> None:
        self._instants: Iterator[datetime] = iter(instants)
        self._last = instants[0]

    def now(self) -> datetime:
        self._last = next(self._instants, self._last)
        return self._last


def waiting(generation: int = 1, ordinal: int = 1) -> RouteSnapshot:
    return RouteSnapshot(
        route_id="route-1", generation=generation, state="retry_wait", attempt_ordinal=ordinal,
        retry_ordinal=ordinal, retry_max=3, deadline=DEADLINE,
    )  # fmt: skip


def retrying(generation: int = 1, ordinal: int = 1) -> RouteSnapshot:
    return waiting(generation, ordinal).model_copy(update={"state": "retrying", "deadline": None})


def test_a_timer_that_wakes_early_rearms_and_fires_once_at_the_deadline() -> None:
    fired: list[AttemptFence] = []

    async def scenario() -> None:
        done = asyncio.Event()

        async def fire_due(fence: AttemptFence) -> RouteSnapshot:
            fired.append(fence)
            done.set()
            return retrying(fence.generation, fence.ordinal)

        # arm (at the deadline: due at once), wake early by 1 ms, re-arm, wake on time
        early = DEADLINE - timedelta(milliseconds=1)
        timers = RouteTimers(fire_due, ScriptedClock(DEADLINE, early, DEADLINE))
        timers.track(waiting())
        await asyncio.wait_for(done.wait(), timeout=5)
        assert len(timers) == 0

    asyncio.run(scenario())
    assert fired == [AttemptFence("route-1", 1, 1)]


def test_an_older_answer_arriving_late_never_cancels_a_newer_timer() -> None:
    async def scenario() -> None:
        async def fire_due(fence: AttemptFence) -> RouteSnapshot:
            raise AssertionError("not due in this test")

        timers = RouteTimers(fire_due, ScriptedClock(T0))
        timers.track(waiting(ordinal=2))
        timers.track(retrying(ordinal=1))
        assert timers.deadline_of("route-1") == DEADLINE
        timers.track(retrying(ordinal=2))
        assert timers.deadline_of("route-1") is None
        timers.cancel_all()

    asyncio.run(scenario())


def test_timers_due_in_the_same_turn_fire_as_one_batch_and_failures_rearm() -> None:
    batches: list[list[AttemptFence]] = []

    async def scenario() -> None:
        done = asyncio.Event()

        async def fire_many(due: Sequence[Due]) -> list[RouteSnapshot | Exception]:
            batches.append(list(due))
            answers: list[RouteSnapshot | Exception] = []
            for fence in due:
                if fence.route_id == "route-3" and len(batches) == 1:
                    answers.append(StoreUnavailableError("fire", "connection refused"))
                else:
                    answers.append(retrying(fence.generation, fence.ordinal).model_copy(
                        update={"route_id": fence.route_id}))  # fmt: skip
            if len(batches) == 2:
                done.set()
            return answers

        timers = RouteTimers(fire_many, ScriptedClock(DEADLINE), batched=True)
        for index in range(5):
            timers.track(waiting().model_copy(update={"route_id": f"route-{index}"}))
        await asyncio.wait_for(done.wait(), timeout=10)
        assert len(timers) == 0

    asyncio.run(scenario())
    assert [sorted(fence.route_id for fence in batch) for batch in batches] == [
        [f"route-{index}" for index in range(5)],
        ["route-3"],
    ], "one batch for the five due together; the failed one again on its own"
