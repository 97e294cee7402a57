"""The route logic as a pure function: (snapshot, command, context) -> Transition | None.
Starts and failure decisions. No Redis, no clock but a ManualClock, no sleeps."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actors.clock import ManualClock
from actors.errors import InvalidStateError, NoEligibleCandidateError, StaleGenerationError
from actors.routes.commands import (
    ReportFailure,
    ReportSuccess,
    Resume,
    RouteContext,
    SkipNow,
    Start,
)
from actors.routes.models import RouteSnapshot
from actors.routes.plan import plan
from actors.routes.profiles import ConcreteProfile, RouteProfile
from catalogue import Evidence, default_catalogue
from tests.actors.route_builders import T0, in_seconds
from tests.actors.route_drivers import R, fail, fire, started
from tests.actors.route_scenarios import (
    MemoryRoutes,
    candidate,
    out_of_credits,
    overloaded,
    profile,
    safe_turn,
    seed_profile,
    tool_turn,
    transport_lost,
    unknown_error,
    usage_limit,
)


@pytest.fixture
def routes() -> MemoryRoutes:
    return MemoryRoutes(ManualClock(T0))


def test_start_selects_the_first_enabled_candidate_at_generation_1(routes: MemoryRoutes) -> None:
    chosen = profile(candidate("off", enabled=False), candidate("claude"), candidate("codex"))
    snapshot = routes.run(R, Start(chosen, "office", "inv-1"))
    assert (snapshot.state, snapshot.generation) == ("active", 1)
    assert (snapshot.candidate_id, snapshot.candidate_index) == ("claude", 1)
    assert (snapshot.caller, snapshot.invocation_id) == ("office", "inv-1")
    assert [r.decision for r in routes.histories[R]] == ["start"]


def test_start_without_an_enabled_candidate_raises_and_writes_nothing(routes: MemoryRoutes) -> None:
    with pytest.raises(NoEligibleCandidateError):
        routes.run(R, Start(profile(candidate("off", enabled=False)), "kanban", "inv-1"))
    assert routes.applied == []


def test_starting_a_route_that_exists_is_a_stale_generation(routes: MemoryRoutes) -> None:
    started(routes)
    with pytest.raises(StaleGenerationError) as caught:
        started(routes)
    assert (caught.value.expected, caught.value.actual) == (0, 1)


def test_a_retry_decision_is_one_fenced_transition_with_everything_it_was_based_on(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    before = routes.snapshot(R)
    transition = plan(
        before,
        ReportFailure(1, overloaded(), safe_turn(), "kanban", "inv-route-1"),
        RouteContext(T0),
    )
    assert transition is not None
    assert (transition.expected_generation, transition.expected_ordinal) == (1, 0)
    assert transition.allowed_from == {"active"}
    route = transition.route
    assert (route.state, route.deadline, route.pending_outcome) == (
        "retry_wait", in_seconds(5), "retry"
    )  # fmt: skip
    assert (route.retry_ordinal, route.retry_max, route.attempt_ordinal) == (1, 3, 1)
    assert (route.code, route.error_class, route.rule) == (
        "provider_overloaded", "transient", "anthropic.body.overloaded_error.v1"
    )  # fmt: skip
    assert route.catalogue_version == default_catalogue().version
    claude = seed_profile().candidates[0]
    assert route.policy_snapshot == claude.policy.model_dump(mode="json")
    assert route.cycle.to_usage().retries == {("claude", "transient"): 1}
    assert transition.attempt is not None
    assert transition.attempt.decision == "retry"
    assert transition.attempt.policy_snapshot == route.policy_snapshot
    assert transition.attempt.deadline == in_seconds(5)


def test_three_retries_at_5_10_and_20_s_then_the_exhausted_skip(routes: MemoryRoutes) -> None:
    started(routes)
    delays = []
    for ordinal in (1, 2, 3):
        waiting = fail(routes, overloaded())
        assert (waiting.state, waiting.retry_ordinal, waiting.attempt_ordinal) == (
            "retry_wait", ordinal, ordinal
        )  # fmt: skip
        assert waiting.deadline is not None
        delays.append((waiting.deadline - routes.clock.now()).total_seconds())
        assert fire(routes).state == "retrying"
    assert delays == [5, 10, 20]
    switched = fail(routes, overloaded())
    assert (switched.state, switched.generation, switched.candidate_id) == ("active", 2, "codex")
    assert switched.cycle.skipped == ("claude",)
    assert (switched.retry_ordinal, switched.attempt_ordinal) == (0, 0)
    decisions = [(r.decision, r.generation, r.ordinal) for r in routes.histories[R]]
    assert decisions == [
        ("start", 1, 0),
        ("retry", 1, 1), ("deadline_reached", 1, 1),
        ("retry", 1, 2), ("deadline_reached", 1, 2),
        ("retry", 1, 3), ("deadline_reached", 1, 3),
        ("skip", 2, 0),
    ]  # fmt: skip
    assert routes.histories[R][-1].candidate_id == "claude", "the record names the skipped one"


def test_a_reset_wait_is_used_once_per_cycle_and_takes_a_new_attempt_ordinal(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    waiting = fail(routes, usage_limit(in_seconds(60)))
    assert (waiting.state, waiting.deadline) == ("waiting_for_reset", in_seconds(60))
    assert (waiting.pending_outcome, waiting.attempt_ordinal) == ("retry_after_reset", 1)
    assert fire(routes).state == "retrying"
    again = fail(routes, usage_limit(routes.clock.now() + timedelta(seconds=60)))
    assert again.state == "action_required"
    assert again.reason is not None
    assert "already used in this cycle" in again.reason


def test_a_reset_beyond_the_maximum_wait_is_not_waited_for(routes: MemoryRoutes) -> None:
    started(routes)
    stopped = fail(routes, usage_limit(T0 + timedelta(hours=6)))
    assert (stopped.state, stopped.deadline) == ("action_required", None)
    assert stopped.reason is not None
    assert "the reset in 6 h is beyond the 5 min maximum wait" in stopped.reason


def test_unsafe_unclassified_and_transport_failures_stop_instead_of_recovering(
    routes: MemoryRoutes,
) -> None:
    cases = {
        "tool": (overloaded(), tool_turn(), "a tool call started"),
        "unknown": (unknown_error(), safe_turn(), "unclassified"),
        "credits": (out_of_credits(), safe_turn(), "stop for manual recovery"),
        "no turn": (overloaded(), None, "no turn evidence was recorded"),
    }
    for name, (evidence, turn, why) in cases.items():
        routes.run(name.replace(" ", "-"), Start(seed_profile(), "kanban", "inv"))
        generation = routes.snapshot(name.replace(" ", "-")).generation
        stopped = routes.run(
            name.replace(" ", "-"), ReportFailure(generation, evidence, turn, "kanban", "inv")
        )
        assert stopped.state == "action_required", name
        assert stopped.reason is not None
        assert why in stopped.reason, name
    transport = profile(candidate("claude"), candidate("codex"))  # transient: skip at once
    routes.run("transport", Start(transport, "kanban", "inv"))
    report = ReportFailure(1, transport_lost(), safe_turn(), "kanban", "inv")
    stopped = routes.run("transport", report)
    assert (stopped.state, stopped.candidate_id, stopped.generation) == (
        "action_required", "claude", 1
    )  # fmt: skip
    assert stopped.reason is not None
    assert "never authorises switching" in stopped.reason


def test_evidence_of_another_execution_than_the_turn_is_not_effect_safe(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    evidence = overloaded().model_copy(update={"execution_id": "exec-2"})
    stopped = fail(routes, evidence)
    assert stopped.state == "action_required"
    assert stopped.reason is not None
    assert "not the current 'exec-2'" in stopped.reason


def test_kanban_and_office_get_identical_transitions(routes: MemoryRoutes) -> None:
    def drive(route_id: str, caller: str) -> list[RouteSnapshot]:
        routes.run(route_id, Start(seed_profile(), caller, f"inv-{route_id}"))
        seen = [fail(routes, overloaded(), route_id=route_id, caller=caller)]
        seen.append(fire(routes, route_id))
        seen.append(fail(routes, usage_limit(in_seconds(60)), route_id=route_id, caller=caller))
        return seen

    routes.clock.set(T0)
    kanban = drive("kanban-route", "kanban")
    routes.clock.set(T0)
    office = drive("office-route", "office")
    ignored = {"route_id", "caller", "invocation_id"}
    assert [s.model_dump(exclude=ignored) for s in kanban] == [
        s.model_dump(exclude=ignored) for s in office
    ]


def test_a_stale_generation_or_a_disallowed_state_raises_before_any_write(
    routes: MemoryRoutes,
) -> None:
    started(routes)
    fail(routes, overloaded())
    count = len(routes.applied)
    with pytest.raises(StaleGenerationError):
        routes.run(R, SkipNow(2))
    with pytest.raises(InvalidStateError):
        routes.run(R, ReportSuccess(1))  # waiting: nothing is running
    with pytest.raises(InvalidStateError):
        routes.run(R, Resume(1))
    assert len(routes.applied) == count


def test_a_concrete_profile_runs_the_interactive_policy_through_the_same_logic(
    routes: MemoryRoutes,
) -> None:
    concrete = ConcreteProfile(id="claude", agent="claude-acp", provider="anthropic")
    routes.run(R, Start(concrete, "kanban", "inv-route-1"))
    delays = []
    for _ in range(5):
        waiting = fail(routes, overloaded())
        assert waiting.deadline is not None
        delays.append((waiting.deadline - routes.clock.now()).total_seconds())
        fire(routes)
    assert delays == [5, 10, 20, 40, 60]
    stopped = fail(routes, overloaded())
    assert (stopped.state, stopped.retry_ordinal, stopped.retry_max) == ("action_required", 5, 5)
    assert isinstance(stopped.policy_snapshot, dict)
    assert stopped.policy_snapshot["builtin"] == "interactive"
    assert stopped.policy_snapshot["delay_cap_seconds"] == 60
    hard = fail_on_new_route(routes, "hard", concrete, out_of_credits())
    assert (hard.state, hard.candidate_id) == ("action_required", "claude")


def fail_on_new_route(
    routes: MemoryRoutes, route_id: str, chosen: RouteProfile, evidence: Evidence
) -> RouteSnapshot:
    routes.run(route_id, Start(chosen, "kanban", f"inv-{route_id}"))
    return fail(routes, evidence, route_id=route_id)
