"""The recovery deadline (actors/routes/deadline.py): no wait outlives it, and at it the
route stops for manual recovery. Pure tier: the planner over MemoryRoutes, a ManualClock.
With circuits and real Redis: tests/actors/engine/test_route_deadline_circuits.py."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from actors.clock import ManualClock
from actors.errors import InvalidCommandError
from actors.routes.commands import ReleaseParked, RetryNow, Start, StartFresh
from actors.routes.deadline import deadline_reason
from actors.routes.models import RouteSnapshot
from policy import Outcome
from tests.actors.route_builders import T0
from tests.actors.route_drivers import R, fail, fire
from tests.actors.route_scenarios import (
    MemoryRoutes,
    candidate,
    overloaded,
    profile,
    retries,
    seed_profile,
    unknown_error,
    usage_limit,
)

SOON = T0 + timedelta(seconds=12)


def start(routes: MemoryRoutes, deadline: datetime | None = SOON) -> None:
    routes.run(R, Start(seed_profile(), "kanban", f"inv-{R}", recovery_deadline=deadline))


@pytest.fixture
def routes() -> MemoryRoutes:
    return MemoryRoutes(ManualClock(T0))


def test_a_wait_within_the_deadline_is_as_the_policy_planned(routes: MemoryRoutes) -> None:
    start(routes)
    waiting = fail(routes, overloaded())  # retry 1 in 5 s
    assert (waiting.deadline, waiting.pending_outcome) == (T0 + timedelta(seconds=5), "retry")
    assert waiting.recovery_deadline == SOON


def test_a_wait_past_the_deadline_ends_at_it_and_then_stops(routes: MemoryRoutes) -> None:
    start(routes)
    fail(routes, overloaded())  # 5 s
    fire(routes)
    cut = fail(routes, overloaded())  # retry 2 would be 10 s later: T0 + 15 s > 12 s
    assert (cut.state, cut.deadline, cut.pending_outcome) == ("retry_wait", SOON, "stop")
    assert cut.next_step == "wait"
    assert cut.retry_ordinal == 2, "the policy's decision is kept, only its wait is cut"

    stopped = fire(routes)
    assert (stopped.state, stopped.next_step, stopped.deadline) == (
        "action_required", "manual", None,
    )  # fmt: skip
    assert stopped.reason == deadline_reason(SOON)
    assert routes.applied[-1].cause == "recovery_deadline"
    assert routes.histories[R][-1].decision == "stop"


def test_a_reset_wait_past_the_deadline_is_cut_too(routes: MemoryRoutes) -> None:
    start(routes)
    cut = fail(routes, usage_limit(T0 + timedelta(minutes=3)))
    assert (cut.state, cut.deadline, cut.pending_outcome) == ("waiting_for_reset", SOON, "stop")


def test_a_wait_planned_after_the_deadline_stops_at_once(routes: MemoryRoutes) -> None:
    start(routes)
    routes.clock.set(SOON + timedelta(seconds=1))  # the turn ran past the deadline
    stopped = fail(routes, overloaded())
    assert (stopped.state, stopped.next_step) == ("action_required", "manual")
    assert stopped.reason == deadline_reason(SOON)
    assert routes.histories[R][-1].decision == "stop", "the deadline decided, not the policy"


def test_a_running_turn_is_not_interrupted_by_the_deadline(routes: MemoryRoutes) -> None:
    start(routes)
    fail(routes, overloaded())
    retrying = fire(routes)
    routes.clock.set(SOON + timedelta(minutes=1))
    assert routes.snapshot(R).state == retrying.state == "retrying"


def test_a_release_slot_past_the_deadline_is_cut_and_one_before_restores_the_wait(
    routes: MemoryRoutes,
) -> None:
    start(routes)
    cut = fail(routes, usage_limit(T0 + timedelta(minutes=3)))
    parked = cut.model_copy(update={"circuit": "c" * 32})  # as if parked on that circuit
    routes.routes[R] = parked
    late = routes.run(R, ReleaseParked("c" * 32, SOON + timedelta(seconds=5)))
    assert (late.deadline, late.pending_outcome) == (SOON, "stop")
    early = routes.run(R, ReleaseParked("c" * 32, T0 + timedelta(seconds=3)))
    assert (early.deadline, early.pending_outcome) == (
        T0 + timedelta(seconds=3), "retry_after_reset",
    )  # fmt: skip


def test_retry_now_before_the_deadline_goes_ahead(routes: MemoryRoutes) -> None:
    start(routes)
    fail(routes, overloaded())
    now = routes.run(R, RetryNow(1))
    assert (now.state, now.next_step) == ("retrying", "wait")


def test_start_fresh_keeps_the_deadline_or_takes_a_new_one(routes: MemoryRoutes) -> None:
    start(routes)
    fail(routes, unknown_error())  # action_required
    kept = routes.run(R, StartFresh(1))
    assert kept.recovery_deadline == SOON
    fail(routes, unknown_error())
    later = T0 + timedelta(hours=1)
    renewed = routes.run(R, StartFresh(2, recovery_deadline=later))
    assert renewed.recovery_deadline == later


@pytest.mark.parametrize(
    "bad",
    [T0 - timedelta(seconds=1), T0, datetime(2026, 3, 1, 13, 0), "2026-03-01T13:00:00Z", 60],
)
def test_a_deadline_that_is_not_an_aware_future_time_is_refused(
    routes: MemoryRoutes, bad: object
) -> None:
    with pytest.raises(InvalidCommandError) as caught:
        start(routes, bad)  # type: ignore[arg-type]  # the bad value is the point
    assert caught.value.field == "recovery_deadline"
    assert routes.applied == []


def test_without_a_deadline_nothing_changes(routes: MemoryRoutes) -> None:
    routes.run(R, Start(profile(candidate("c", transient=retries(3, 600, Outcome.STOP))), "k", "i"))
    far = fail(routes, overloaded())
    assert (far.deadline, far.pending_outcome) == (T0 + timedelta(seconds=600), "retry")
    assert RouteSnapshot.absent(R).recovery_deadline is None
