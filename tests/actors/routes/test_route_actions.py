"""The route logic as a pure function: timers, manual actions, successes and utility
routes. No Redis, no clock but a ManualClock, no sleeps."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.clock import ManualClock
from actors.errors import InvalidStateError
from actors.routes.commands import (
    CancelWait,
    Close,
    FireDue,
    ReportFailure,
    ReportSuccess,
    Resume,
    RetryNow,
    RouteContext,
    SkipNow,
    Start,
    StartFresh,
    StopRoute,
    UpdateProfile,
)
from actors.routes.plan import plan
from policy import Outcome
from tests.actors.route_builders import T0, in_seconds
from tests.actors.route_drivers import R, fail, fire, started
from tests.actors.route_scenarios import (
    MemoryRoutes,
    candidate,
    overloaded,
    profile,
    retries,
    safe_turn,
    seed_profile,
    usage_limit,
)


@pytest.fixture
def routes() -> MemoryRoutes:
    return MemoryRoutes(ManualClock(T0))


@given(
    generation=st.integers(min_value=0, max_value=5),
    ordinal=st.integers(min_value=0, max_value=5),
    late_by_s=st.integers(min_value=-10, max_value=10),
)
def test_a_timer_fires_only_for_the_pending_attempt_once_its_deadline_has_come(
    generation: int, ordinal: int, late_by_s: int
) -> None:
    routes = MemoryRoutes(ManualClock(T0))
    started(routes)
    pending = fail(routes, overloaded())  # generation 1, attempt ordinal 1, due at +5 s
    assert pending.deadline is not None
    routes.clock.set(pending.deadline + timedelta(seconds=late_by_s))
    transition = plan(pending, FireDue(generation, ordinal), RouteContext(routes.clock.now()))
    fires = (generation, ordinal) == (1, 1) and late_by_s >= 0
    assert (transition is not None) == fires
    if transition is not None:
        assert transition.route.state == "retrying"
        assert transition.route.deadline is None


def test_retry_now_consumes_the_pending_attempt_so_its_timer_finds_nothing(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    fail(routes, overloaded())
    retrying = routes.run(R, RetryNow(1))
    assert (retrying.state, retrying.attempt_ordinal) == ("retrying", 1)
    routes.clock.advance(timedelta(seconds=5))
    assert routes.run(R, FireDue(1, 1)) == retrying


def test_cancel_and_stop_are_idempotent_and_close_is_terminal(routes: MemoryRoutes) -> None:
    started(routes)
    fail(routes, overloaded())
    cancelled = routes.run(R, CancelWait(1))
    assert (cancelled.state, cancelled.deadline, cancelled.pending_outcome) == (
        "action_required", None, "stop"
    )  # fmt: skip
    assert routes.run(R, CancelWait(1)) == cancelled
    assert routes.run(R, StopRoute(1)) == cancelled
    closed = routes.run(R, Close(1))
    assert closed.state == "closed"
    assert routes.run(R, Close(1)) == closed
    for command in (StopRoute(1), Resume(1), StartFresh(1), RetryNow(1), ReportSuccess(1)):
        with pytest.raises(InvalidStateError):
            routes.run(R, command)


def test_resume_keeps_candidate_generation_and_cycle_and_start_fresh_begins_anew(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    fail(routes, overloaded())
    stopped = routes.run(R, CancelWait(1))
    resumed = routes.run(R, Resume(1))
    assert (resumed.state, resumed.generation, resumed.candidate_id) == ("active", 1, "claude")
    assert resumed.cycle == stopped.cycle
    assert fail(routes, overloaded()).retry_ordinal == 2, "the cycle goes on"
    routes.run(R, CancelWait(1))
    fresh = routes.run(R, StartFresh(1))
    assert (fresh.state, fresh.generation, fresh.candidate_id) == ("active", 2, "claude")
    assert (fresh.code, fresh.retry_ordinal, fresh.cycle.retries) == (None, 0, ())
    assert fail(routes, overloaded()).retry_ordinal == 1, "a new cycle"


def test_a_skip_wraps_around_and_never_returns_to_a_candidate_skipped_in_the_cycle(
    routes: MemoryRoutes,
) -> None:
    chain = profile(candidate("a"), candidate("b", enabled=False), candidate("c"))
    routes.run(R, Start(chain, "kanban", "inv-route-1"))
    on_c = fail(routes, overloaded())
    assert (on_c.candidate_id, on_c.generation) == ("c", 2)
    none_left = fail(routes, overloaded())
    assert (none_left.state, none_left.candidate_id, none_left.generation) == (
        "action_required", "c", 2
    )  # fmt: skip
    assert none_left.reason is not None
    assert "no eligible candidate is left" in none_left.reason
    assert routes.histories[R][-1].decision == "skip"
    # A success ends the cycle: every candidate is eligible again, in order after c.
    routes.run(R, Resume(2))
    routes.run(R, ReportSuccess(2))
    assert fail(routes, overloaded()).candidate_id == "a"


def test_a_success_ends_the_cycle_and_a_clean_success_writes_nothing(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    count = len(routes.applied)
    routes.run(R, ReportSuccess(1))
    assert len(routes.applied) == count
    fail(routes, overloaded())
    fire(routes)
    active = routes.run(R, ReportSuccess(1))
    assert (active.state, active.code, active.retry_ordinal, active.cycle.retries) == (
        "active", None, 0, ()
    )  # fmt: skip
    assert active.attempt_ordinal == 1, "attempt ordinals never repeat within a generation"
    again = fail(routes, overloaded())
    assert (again.retry_ordinal, again.attempt_ordinal) == (1, 2)


def test_utility_routes_expire_beyond_any_pending_deadline() -> None:
    routes = MemoryRoutes(ManualClock(T0))
    routes.run(R, Start(seed_profile(), "utility", "inv-u"))
    assert routes.applied[-1].expire_after_s == routes.settings.utility_ttl_s
    routes.run(R, ReportFailure(1, usage_limit(in_seconds(60)), safe_turn(), "utility", "inv-u"))
    assert routes.applied[-1].expire_after_s == routes.settings.utility_ttl_s + 60
    closed = routes.run(R, Close(1))
    assert closed.state == "closed"
    assert routes.applied[-1].expire_after_s == routes.settings.utility_ttl_s


def test_a_utility_report_from_another_invocation_is_stale_and_stops(
    routes: MemoryRoutes,
) -> None:
    routes.run(R, Start(seed_profile(), "utility", "inv-u"))
    report = ReportFailure(1, overloaded(), safe_turn(), "utility", "inv-other")
    stopped = routes.run(R, report)
    assert stopped.state == "action_required"
    assert stopped.reason is not None
    assert stopped.reason.startswith("stale failure")


def test_a_refused_foreign_report_leaves_the_route_its_own_invocation_and_caller(
    routes: MemoryRoutes,
) -> None:
    """The defect it pins: the refused report's invocation and caller overwrote the
    route's, so after Resume the route's own invocation was refused as stale."""
    routes.run(R, Start(seed_profile(), "utility", "inv-u"))
    foreign = ReportFailure(1, overloaded(), safe_turn(), "kanban", "inv-other")
    stopped = routes.run(R, foreign)
    assert stopped.state == "action_required"
    assert (stopped.invocation_id, stopped.caller) == ("inv-u", "utility")
    resumed = routes.run(R, Resume(1))
    assert (resumed.state, resumed.invocation_id, resumed.caller) == ("active", "inv-u", "utility")
    own = routes.run(R, ReportFailure(1, overloaded(), safe_turn(), "utility", "inv-u"))
    assert own.state == "retry_wait", own.reason
    assert (own.invocation_id, own.caller) == ("inv-u", "utility")


def test_a_partial_utility_result_is_never_recovered(routes: MemoryRoutes) -> None:
    routes.run(R, Start(seed_profile(), "utility", "inv-u"))
    partial = safe_turn().model_copy(update={"partial_utility_result": True})
    stopped = routes.run(R, ReportFailure(1, overloaded(), partial, "utility", "inv-u"))
    assert stopped.state == "action_required"
    assert stopped.reason is not None
    assert "partial utility result" in stopped.reason


def test_a_candidate_removed_from_the_profile_stops_at_its_next_failure(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    routes.run(R, UpdateProfile(profile(candidate("codex"))))
    stopped = fail(routes, overloaded())
    assert stopped.state == "action_required"
    assert stopped.reason == "candidate 'claude' is no longer in the profile, so stop"


def test_skip_now_from_a_wait_moves_to_the_next_candidate_in_a_new_generation(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    fail(routes, overloaded())
    switched = routes.run(R, SkipNow(1))
    assert (switched.state, switched.generation, switched.candidate_id) == ("active", 2, "codex")
    assert [r.decision for r in routes.histories[R]][-1] == "skip_now"
    hard_stop = profile(candidate("only", transient=retries(1, 5, Outcome.STOP)))
    routes.run("route-2", Start(hard_stop, "kanban", "inv"))
    routes.run("route-2", ReportFailure(1, overloaded(), safe_turn(), "kanban", "inv"))
    alone = routes.run("route-2", SkipNow(1))
    assert (alone.state, alone.generation) == ("action_required", 1)
