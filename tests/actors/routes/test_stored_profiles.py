"""Routes that follow a stored profile, planned purely: the profiles a round read are the
context's ProfileBoard, swapped here between commands as edits would change them. A route
decides with the profile's current version at each decision and records that version;
a deleted or invalid profile stops it (or refuses the command) and never authorises work."""

from __future__ import annotations

import pytest

from actors.clock import ManualClock
from actors.errors import InvalidCommandError, InvalidIdentifierError, NoEligibleCandidateError
from actors.routes.commands import (
    ReportFailure,
    Resume,
    RetryNow,
    SkipNow,
    Start,
    StartFresh,
    StopRoute,
    UpdateProfile,
)
from actors.routes.models import RouteSnapshot
from actors.routes.profile_board import ProfileBoard, ProfileRevision
from actors.routes.profile_errors import (
    InvalidStoredProfileError,
    ProfileConfigurationError,
    ProfileNotFoundError,
    ProfileNotReadError,
)
from actors.routes.profiles import profile_json
from policy import DynamicProfile, Outcome
from tests.actors.route_builders import T0
from tests.actors.route_drivers import R, fail, fire
from tests.actors.route_scenarios import (
    MemoryRoutes,
    candidate,
    immediately,
    overloaded,
    profile,
    retries,
    safe_turn,
    seed_profile,
)

FLEET = "fleet"


def stopping() -> DynamicProfile:
    """An edit of the seed profile: a transient failure on claude stops at once."""
    return profile(candidate("claude", transient=immediately(Outcome.STOP)), candidate("codex"))


def board(version: int, document: DynamicProfile | None = None) -> ProfileBoard:
    chosen = document or seed_profile()
    return ProfileBoard({FLEET: ProfileRevision(FLEET, version, chosen)})


def gone(error: ProfileConfigurationError) -> ProfileBoard:
    return ProfileBoard({FLEET: error})


def routes_on(profiles: ProfileBoard | None) -> MemoryRoutes:
    return MemoryRoutes(ManualClock(T0), profiles=profiles)


def start_by_id(routes: MemoryRoutes, profile_id: str = FLEET) -> RouteSnapshot:
    return routes.run(R, Start(None, "kanban", f"inv-{R}", profile_id=profile_id))


def versions(routes: MemoryRoutes) -> list[tuple[str, str | None, int | None]]:
    return [(r.decision, r.profile_id, r.profile_version) for r in routes.histories[R]]


def test_a_route_started_by_id_records_the_profile_id_version_and_copy() -> None:
    routes = routes_on(board(3))
    started = start_by_id(routes)
    assert (started.state, started.candidate_id) == ("active", "claude")
    assert (started.profile_id, started.profile_version) == (FLEET, 3)
    assert started.profile == profile_json(seed_profile())
    assert versions(routes) == [("start", FLEET, 3)]


def test_a_route_follows_an_edit_at_its_next_decision_and_records_each_version() -> None:
    routes = routes_on(board(1))
    start_by_id(routes)
    waiting = fail(routes, overloaded())
    assert (waiting.state, waiting.retry_ordinal, waiting.profile_version) == ("retry_wait", 1, 1)
    routes.profiles = board(2, stopping())  # the edit lands while the retry waits
    retrying = fire(routes)
    # carrying out the decision made with version 1 keeps version 1
    assert (retrying.state, retrying.profile_version) == ("retrying", 1)
    stopped = fail(routes, overloaded())
    assert (stopped.state, stopped.profile_version) == ("action_required", 2)
    assert stopped.profile == profile_json(stopping())
    assert versions(routes) == [
        ("start", FLEET, 1), ("retry", FLEET, 1), ("deadline_reached", FLEET, 1),
        ("stop", FLEET, 2),
    ]  # fmt: skip
    last = routes.histories[R][-1]
    assert last.policy_snapshot == stopping().candidates[0].policy.model_dump(mode="json")


def test_a_skip_chooses_from_the_current_version_of_the_profile() -> None:
    skipping = profile(candidate("claude"), candidate("codex"))
    routes = routes_on(board(1, skipping))
    start_by_id(routes)
    routes.profiles = board(
        2, profile(candidate("claude"), candidate("gemini"), candidate("codex"))
    )
    switched = fail(routes, overloaded())
    assert (switched.candidate_id, switched.generation, switched.profile_version) == (
        "gemini", 2, 2,
    )  # fmt: skip


@pytest.mark.parametrize(
    "error",
    [ProfileNotFoundError(FLEET), InvalidStoredProfileError(FLEET, 2, "its document is not JSON")],
    ids=["deleted", "invalid"],
)
def test_a_failure_on_a_route_whose_profile_is_gone_stops_it_naming_what_to_do(
    error: ProfileConfigurationError,
) -> None:
    routes = routes_on(board(1))
    start_by_id(routes)
    routes.profiles = gone(error)
    stopped = fail(routes, overloaded())
    assert (stopped.state, stopped.next_step) == ("action_required", "manual")
    assert stopped.reason == f"policy configuration error, fix the profile: {error.detail}"
    assert stopped.code == "provider_overloaded"  # the failure is recorded all the same
    assert versions(routes)[-1] == ("stop", FLEET, 1)


def test_a_due_attempt_whose_profile_was_deleted_stops_instead_of_dispatching() -> None:
    routes = routes_on(board(1))
    start_by_id(routes)
    fail(routes, overloaded())
    routes.profiles = gone(ProfileNotFoundError(FLEET))
    stopped = fire(routes)
    assert (stopped.state, stopped.deadline) == ("action_required", None)
    assert "profile 'fleet' does not exist" in (stopped.reason or "")
    assert versions(routes)[-1][0] == "stop"


@pytest.mark.parametrize("command", ["retry_now", "skip_now"])
def test_a_manual_retry_or_skip_on_a_deleted_profile_stops_the_route(command: str) -> None:
    routes = routes_on(board(1))
    start_by_id(routes)
    waiting = fail(routes, overloaded())
    routes.profiles = gone(ProfileNotFoundError(FLEET))
    action = RetryNow(waiting.generation) if command == "retry_now" else SkipNow(waiting.generation)
    stopped = routes.run(R, action)
    assert stopped.state == "action_required"
    assert (stopped.reason or "").startswith("policy configuration error, fix the profile")


def test_a_start_on_a_missing_profile_is_refused_and_writes_nothing() -> None:
    routes = routes_on(gone(ProfileNotFoundError(FLEET)))
    with pytest.raises(ProfileNotFoundError, match="'fleet' does not exist"):
        start_by_id(routes)
    assert routes.applied == []


@pytest.mark.parametrize(
    ("profile_given", "profile_id", "refusal"),
    [
        (True, FLEET, InvalidCommandError),
        (False, None, InvalidCommandError),
        (False, "no spaces", InvalidIdentifierError),
    ],
    ids=["both", "neither", "bad-id"],
)
def test_a_start_names_exactly_one_profile_with_a_valid_id(
    profile_given: bool, profile_id: str | None, refusal: type[Exception]
) -> None:
    routes = routes_on(board(1))
    given = seed_profile() if profile_given else None
    with pytest.raises(refusal):
        routes.run(R, Start(given, "kanban", "inv-1", profile_id=profile_id))
    assert routes.applied == []


def test_planning_a_followed_route_without_its_profile_read_refuses_without_effect() -> None:
    routes = routes_on(board(1))
    start_by_id(routes)
    routes.profiles = None
    generation = routes.snapshot(R).generation
    with pytest.raises(ProfileNotReadError):
        routes.run(R, ReportFailure(generation, overloaded(), safe_turn(), "kanban", f"inv-{R}"))
    assert routes.snapshot(R).state == "active"


def test_resume_and_start_fresh_are_refused_while_the_profile_is_gone() -> None:
    routes = routes_on(board(1))
    start_by_id(routes)
    stopped = routes.run(R, StopRoute(1))
    routes.profiles = gone(InvalidStoredProfileError(FLEET, 4, "it holds legacy rules"))
    with pytest.raises(InvalidStoredProfileError):
        routes.run(R, Resume(stopped.generation))
    with pytest.raises(InvalidStoredProfileError):
        routes.run(R, StartFresh(stopped.generation))
    assert routes.snapshot(R).state == "action_required"


def test_start_fresh_with_an_inline_profile_stops_following_and_by_id_follows_again() -> None:
    routes = routes_on(board(1))
    start_by_id(routes)
    stopped = routes.run(R, StopRoute(1))
    inline = routes.run(R, StartFresh(stopped.generation, profile=stopping()))
    assert (inline.profile_id, inline.profile_version) == (None, None)
    assert inline.profile == profile_json(stopping())
    again = routes.run(R, StopRoute(inline.generation))
    routes.profiles = board(5)
    following = routes.run(R, StartFresh(again.generation, profile_id=FLEET))
    assert (following.state, following.profile_id, following.profile_version) == (
        "active", FLEET, 5,
    )  # fmt: skip


def test_an_inline_profile_edit_of_a_route_that_follows_a_stored_one_is_refused() -> None:
    routes = routes_on(board(1))
    start_by_id(routes)
    with pytest.raises(InvalidCommandError, match="profile store"):
        routes.run(R, UpdateProfile(stopping()))


def test_a_stored_profile_with_no_enabled_candidate_refuses_the_start() -> None:
    routes = routes_on(board(1, profile(candidate("claude", enabled=False))))
    with pytest.raises(NoEligibleCandidateError):
        start_by_id(routes)


def test_a_route_with_its_own_profile_plans_as_before_without_a_board() -> None:
    routes = routes_on(None)
    routes.run(R, Start(seed_profile(), "kanban", f"inv-{R}"))
    waiting = fail(routes, overloaded())
    assert (waiting.state, waiting.profile_id, waiting.profile_version) == (
        "retry_wait",
        None,
        None,
    )
    assert all(r.profile_id is None for r in routes.histories[R])


def test_retries_a_followed_profile_allows_are_those_of_its_current_version() -> None:
    routes = routes_on(
        board(1, profile(candidate("claude", transient=retries(1, 5, Outcome.STOP))))
    )
    start_by_id(routes)
    fail(routes, overloaded())
    fire(routes)
    routes.profiles = board(2, profile(candidate("claude", transient=retries(3, 5, Outcome.STOP))))
    again = fail(routes, overloaded())  # version 1 would stop here: its one retry is used
    assert (again.state, again.retry_ordinal, again.retry_max) == ("retry_wait", 2, 3)
    assert again.profile_version == 2
