"""`next_step` after every transition of the route state machine: a table over the states a
route is in and the causes that move it (docs/CONTRACTS.md, Routes). Pure tier: the planner
over MemoryRoutes, a ManualClock, no Redis."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from actors.clock import ManualClock
from actors.routes.commands import (
    CancelWait,
    Close,
    Quarantine,
    ReportSuccess,
    Resume,
    RetryNow,
    ReturnUnsent,
    RouteCommand,
    SettleDispatch,
    SkipNow,
    Start,
    StartFresh,
    StopRoute,
    UpdateProfile,
)
from actors.routes.dispatch_outcomes import MAX_REDELIVERIES
from actors.routes.models import RouteSnapshot
from actors.routes.next_steps import STATE_NEXT_STEP
from policy import Outcome
from tests.actors.route_builders import T0
from tests.actors.route_drivers import R, fail, fire, started
from tests.actors.route_scenarios import (
    MemoryRoutes,
    candidate,
    out_of_credits,
    overloaded,
    profile,
    retries,
    seed_profile,
    unknown_error,
    usage_limit,
)

Setup = Callable[[MemoryRoutes], RouteSnapshot]


def run(routes: MemoryRoutes, command: RouteCommand) -> RouteSnapshot:
    return routes.run(R, command)


def generation(routes: MemoryRoutes) -> int:
    return routes.snapshot(R).generation


def waiting(routes: MemoryRoutes) -> RouteSnapshot:
    started(routes)
    return fail(routes, overloaded())


def retrying(routes: MemoryRoutes) -> RouteSnapshot:
    waiting(routes)
    return fire(routes)


def stopped(routes: MemoryRoutes) -> RouteSnapshot:
    started(routes)
    return fail(routes, unknown_error())


def refused(routes: MemoryRoutes, times: int) -> RouteSnapshot:
    retrying(routes)
    for _ in range(times - 1):
        snapshot = routes.snapshot(R)
        run(routes, ReturnUnsent(snapshot.generation, snapshot.attempt_ordinal, "pool full"))
        fire(routes)
    snapshot = routes.snapshot(R)
    return run(routes, ReturnUnsent(snapshot.generation, snapshot.attempt_ordinal, "pool full"))


def skipping(routes: MemoryRoutes) -> RouteSnapshot:
    routes.run(R, Start(profile(candidate("claude"), candidate("codex")), "kanban", "inv-1"))
    return fail(routes, out_of_credits())


def resetting(routes: MemoryRoutes) -> RouteSnapshot:
    started(routes)
    return fail(routes, usage_limit(RESET_SOON))


def reset_retrying(routes: MemoryRoutes) -> RouteSnapshot:
    resetting(routes)
    return fire(routes)


def two_candidates(routes: MemoryRoutes) -> RouteSnapshot:
    """Retried once on claude, then skipped to codex; codex's failures stop."""
    claude = candidate("claude", transient=retries(1, 1, Outcome.SKIP))
    codex = candidate("codex", transient=retries(1, 1, Outcome.STOP))
    return routes.run(R, Start(profile(claude, codex), "kanban", "inv-1"))


def bounded(routes: MemoryRoutes) -> RouteSnapshot:
    """Waiting for a retry that the recovery deadline cut (it stops when it comes)."""
    deadline = T0 + timedelta(seconds=2)
    routes.run(R, Start(seed_profile(), "kanban", "inv-1", recovery_deadline=deadline))
    return fail(routes, overloaded())


def steps(*actions: Callable[[MemoryRoutes], object]) -> Setup:
    """A setup that runs `actions` in order: the route as it is after the last."""

    def setup(routes: MemoryRoutes) -> RouteSnapshot:
        for action in actions:
            action(routes)
        return routes.snapshot(R)

    return setup


def then(command: Callable[[MemoryRoutes], RouteCommand]) -> Callable[[MemoryRoutes], object]:
    """An action that runs the command built from the route as it is."""
    return lambda routes: run(routes, command(routes))


RESET_SOON = T0 + timedelta(minutes=2)

# (from state, cause) -> how to get there and cause it; the state and next step after.
TABLE: dict[tuple[str, str], tuple[Setup, str, str]] = {
    ("none", "start"): (steps(started), "active", "run"),
    ("active", "failure: retry"): (waiting, "retry_wait", "wait"),
    ("active", "failure: wait for a reset"): (
        steps(started, lambda r: fail(r, usage_limit(RESET_SOON))), "waiting_for_reset", "wait",
    ),
    ("active", "failure: skip"): (skipping, "active", "run"),
    ("active", "failure: stop"): (stopped, "action_required", "manual"),
    ("active", "success after a failure"): (
        steps(waiting, fire, then(lambda r: ReportSuccess(generation(r)))), "active", "done",
    ),
    ("active", "stop"): (
        steps(started, then(lambda r: StopRoute(generation(r)))), "action_required", "manual",
    ),
    ("active", "profile update"): (
        steps(started, then(lambda _: UpdateProfile(seed_profile()))), "active", "run",
    ),
    ("active", "close"): (steps(started, then(lambda r: Close(generation(r)))), "closed", "done"),
    ("retry_wait", "deadline reached"): (retrying, "retrying", "wait"),
    ("retry_wait", "retry now"): (
        steps(waiting, then(lambda r: RetryNow(generation(r)))), "retrying", "wait",
    ),
    ("retry_wait", "skip now"): (
        steps(waiting, then(lambda r: SkipNow(generation(r)))), "active", "run",
    ),
    ("retry_wait", "cancel"): (
        steps(waiting, then(lambda r: CancelWait(generation(r)))), "action_required", "manual",
    ),
    ("retry_wait", "profile update"): (
        steps(waiting, then(lambda _: UpdateProfile(seed_profile()))), "retry_wait", "wait",
    ),
    ("retrying", "success"): (
        steps(retrying, then(lambda r: ReportSuccess(generation(r)))), "active", "done",
    ),
    ("retrying", "failure: retry"): (
        steps(retrying, lambda r: fail(r, overloaded())), "retry_wait", "wait",
    ),
    ("retrying", "not dispatched"): (lambda r: refused(r, 1), "retry_wait", "wait"),
    ("retrying", "not dispatched, bound reached"): (
        lambda r: refused(r, MAX_REDELIVERIES + 1), "action_required", "manual",
    ),
    ("retrying", "ambiguous dispatch"): (
        steps(retrying, then(lambda r: SettleDispatch(
            generation(r), r.snapshot(R).attempt_ordinal, "dispatch outcome ambiguous"
        ))),
        "action_required", "manual",
    ),
    ("action_required", "resume"): (
        steps(stopped, then(lambda r: Resume(generation(r)))), "active", "run",
    ),
    ("action_required", "start fresh"): (
        steps(stopped, then(lambda r: StartFresh(generation(r)))), "active", "run",
    ),
    ("action_required", "close"): (
        steps(stopped, then(lambda r: Close(generation(r)))), "closed", "done",
    ),
    ("waiting_for_reset", "deadline reached"): (reset_retrying, "retrying", "wait"),
    ("waiting_for_reset", "retry now"): (
        steps(resetting, then(lambda r: RetryNow(generation(r)))), "retrying", "wait",
    ),
    ("waiting_for_reset", "skip now"): (
        steps(resetting, then(lambda r: SkipNow(generation(r)))), "active", "run",
    ),
    ("waiting_for_reset", "cancel"): (
        steps(resetting, then(lambda r: CancelWait(generation(r)))), "action_required", "manual",
    ),
    ("waiting_for_reset", "stop"): (
        steps(resetting, then(lambda r: StopRoute(generation(r)))), "action_required", "manual",
    ),
    ("waiting_for_reset", "close"): (
        steps(resetting, then(lambda r: Close(generation(r)))), "closed", "done",
    ),
    ("retry_wait", "stop"): (
        steps(waiting, then(lambda r: StopRoute(generation(r)))), "action_required", "manual",
    ),
    ("retry_wait", "close"): (
        steps(waiting, then(lambda r: Close(generation(r)))), "closed", "done",
    ),
    ("retry_wait", "recovery deadline reached"): (
        steps(bounded, fire), "action_required", "manual",
    ),
    ("retrying", "failure: skip"): (
        steps(two_candidates, lambda r: fail(r, overloaded()), fire,
              lambda r: fail(r, overloaded())),
        "active", "run",
    ),
    ("retrying", "failure: stop"): (
        steps(retrying, lambda r: fail(r, unknown_error())), "action_required", "manual",
    ),
    ("retrying", "failure: wait for a reset"): (
        steps(retrying, lambda r: fail(r, usage_limit(RESET_SOON + timedelta(minutes=1)))),
        "waiting_for_reset", "wait",
    ),
    ("retrying", "success after a reset wait"): (
        steps(reset_retrying, then(lambda r: ReportSuccess(generation(r)))), "active", "done",
    ),
    ("retrying", "stop"): (
        steps(retrying, then(lambda r: StopRoute(generation(r)))), "action_required", "manual",
    ),
    ("retrying", "close"): (
        steps(retrying, then(lambda r: Close(generation(r)))), "closed", "done",
    ),
    ("active", "quarantine"): (
        steps(started, then(lambda _: Quarantine(
            "route", "profile", "", "corrupt: route profile: not JSON"
        ))),
        "action_required", "manual",
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        pytest.param(moment, expected, id=f"{moment[0]}, {moment[1]}")
        for moment, expected in TABLE.items()
    ],
)
def test_every_transition_says_what_the_caller_does_next(
    moment: tuple[str, str], expected: tuple[Setup, str, str]
) -> None:
    setup, state, next_step = expected
    routes = MemoryRoutes(ManualClock(T0))
    after = setup(routes)
    assert (after.state, after.next_step) == (state, next_step), moment
    assert routes.snapshot(R).next_step == next_step, "as stored, as a read returns it"


def test_a_skip_says_run_already_while_switching() -> None:
    """The caller that reads the route between the skip and its completion sees `run` on
    the new candidate, in the new generation: no diffing of candidates to notice it."""
    routes = MemoryRoutes(ManualClock(T0))
    routes.run(R, Start(profile(candidate("claude"), candidate("codex")), "kanban", "inv-1"))
    after = fail(routes, out_of_credits())  # skip to codex: switching, then active
    assert (after.candidate_id, after.generation, after.next_step) == ("codex", 2, "run")
    switching = routes.applied[-2].route
    assert (switching.state, switching.next_step) == ("switching", "run")


def test_a_park_on_an_open_circuit_says_wait_like_any_wait() -> None:
    """Covered with circuits in tests/actors/engine/test_route_circuits.py; here the
    state table: every waiting state implies `wait`, and a route never started `done`."""
    assert {STATE_NEXT_STEP[s] for s in ("retry_wait", "waiting_for_reset", "retrying")} == {"wait"}
    assert RouteSnapshot.absent(R).next_step == "done"


def test_a_route_stored_before_next_step_existed_reads_with_its_states_step() -> None:
    stored = {"route_id": R, "generation": 1, "state": "action_required"}
    assert RouteSnapshot.model_validate(stored).next_step == "manual"


def test_the_last_retry_then_a_stop_policy_says_manual() -> None:
    routes = MemoryRoutes(ManualClock(T0))
    one_retry = profile(candidate("claude", transient=retries(1, 1, Outcome.STOP)))
    routes.run(R, Start(one_retry, "kanban", "inv-1"))
    assert fail(routes, overloaded()).next_step == "wait"
    assert fire(routes).next_step == "wait"
    assert fail(routes, overloaded()).next_step == "manual"
