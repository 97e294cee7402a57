"""A route's stored profile that cannot be read raises CorruptProfileError naming the
route, wherever it is read (the codec, the planner); the callers that handled an
unreadable profile before still do. No Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import JsonValue, ValidationError
from pydantic_core import to_json

from actors.clock import ManualClock
from actors.errors import (
    CorruptProfileError,
    CorruptRouteError,
    RecoveryError,
    StoreUnavailableError,
)
from actors.routes import profiles as route_profiles
from actors.routes.circuit_board import CircuitBinding, candidate_key
from actors.routes.commands import ReportFailure, RouteContext, SkipNow
from actors.routes.models import RouteSnapshot
from actors.routes.plan import plan
from actors.routes.profiles import profile_from_json, profile_json
from actors.store.route_codec import decode_route, transition_request
from tests.actors.route_builders import T0
from tests.actors.route_drivers import R, started
from tests.actors.route_scenarios import MemoryRoutes, overloaded, safe_turn, seed_profile

NOT_OBJECTS: list[tuple[JsonValue, str]] = [
    (None, "the route stores no profile"),
    ([], "expected a JSON object, got an array"),
    ("claude", "expected a JSON object, got a string"),
    (3, "expected a JSON object, got a number"),
    (True, "expected a JSON object, got a boolean"),
]
INVALID: list[dict[str, Any]] = [
    {},
    {"candidates": "claude"},
    {"candidates": []},
    {"kind": "concrete", "agent": "claude-acp"},
    {"kind": "concrete", "id": "claude", "agent": "claude-acp", "colour": "red"},
]


@pytest.mark.parametrize(("stored", "detail"), NOT_OBJECTS)
def test_a_stored_profile_that_is_not_an_object_raises_corrupt_profile_error_naming_the_route(
    stored: JsonValue, detail: str
) -> None:
    with pytest.raises(CorruptProfileError) as caught:
        profile_from_json(R, stored)
    assert (caught.value.route_id, caught.value.detail) == (R, detail)
    assert str(caught.value) == f"route {R!r} holds an unreadable profile: {detail}"


@pytest.mark.parametrize("stored", INVALID)
def test_a_stored_profile_that_fails_validation_raises_corrupt_profile_error_naming_the_route(
    stored: dict[str, Any],
) -> None:
    with pytest.raises(CorruptProfileError) as caught:
        profile_from_json(R, stored)
    assert caught.value.route_id == R
    assert caught.value.detail.startswith("not a valid profile: ")
    assert str(caught.value).startswith(f"route {R!r} holds an unreadable profile: ")
    assert isinstance(caught.value.__cause__, ValidationError)


def test_a_stored_profile_that_is_not_json_at_all_raises_corrupt_profile_error() -> None:
    circular: dict[str, Any] = {"candidates": []}
    circular["candidates"].append(circular)
    with pytest.raises(CorruptProfileError) as caught:
        profile_from_json(R, circular)
    assert caught.value.route_id == R


def test_a_corrupt_profile_is_a_recovery_error_and_no_store_failure() -> None:
    error = CorruptProfileError(R, "the route stores no profile")
    assert isinstance(error, RecoveryError)
    assert not isinstance(error, StoreUnavailableError)


def test_a_valid_stored_profile_still_reads_back_as_the_profile() -> None:
    stored = profile_json(seed_profile())
    assert profile_from_json(R, stored) == seed_profile()


def test_a_stored_document_is_encoded_once_however_often_its_profile_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoded: list[object] = []

    def counting_to_json(value: object) -> bytes:
        encoded.append(value)
        return to_json(value)

    monkeypatch.setattr(route_profiles, "to_json", counting_to_json)
    stored = profile_json(seed_profile())
    first = profile_from_json(R, stored)
    assert all(profile_from_json(R, stored) is first for _ in range(5))
    assert encoded == [stored], "a snapshot's plan, circuits and notices share one decode"
    other_copy = profile_json(seed_profile())
    assert profile_from_json(R, other_copy) is first, "routes with equal profiles share one"
    assert len(encoded) == 2, "an equal document of another route is looked up by its text"


def _stored_route(**fields: str) -> dict[str, str]:
    """A route hash as Redis holds it: every value a string, "" for unset."""
    return {"state": "active", "generation": "1", "candidate_id": "claude", **fields}


KEY = f"recovery:route:{R}"


def test_routes_storing_one_profile_text_share_one_document_written_back_unchanged() -> None:
    text = json.dumps(profile_json(seed_profile()))
    first = decode_route(R, _stored_route(profile=text), KEY)
    second = decode_route("route-2", _stored_route(profile=text), KEY)
    assert first.profile is second.profile  # parsed once, then found by its text
    assert profile_from_json(R, first.profile) is profile_from_json("route-2", second.profile)
    transition = plan(
        first, ReportFailure(1, overloaded(), safe_turn(), "k", "i"), RouteContext(T0)
    )
    assert transition is not None
    (argv, _attempt) = transition_request(transition, T0, 100)
    fields = json.loads(argv)["fields"]
    stored = dict(zip(fields[0::2], fields[1::2], strict=True))
    assert json.loads(stored["profile"]) == json.loads(text)  # the shared text, as stored


@pytest.mark.parametrize("text", ["not json", "{", '{"candidates": [', "\x00"])
def test_a_stored_route_whose_profile_text_is_not_json_is_corrupt_naming_key_and_field(
    text: str,
) -> None:
    with pytest.raises(CorruptRouteError) as caught:
        decode_route(R, _stored_route(profile=text), KEY)
    assert caught.value.route_id == R
    assert (caught.value.key, caught.value.field) == (KEY, "profile")
    assert caught.value.detail.startswith("not JSON: ")
    assert caught.value.reason.startswith(f"corrupt: {KEY} profile: not JSON: ")
    assert caught.value.stored == text
    salvaged = caught.value.salvaged
    assert isinstance(salvaged, RouteSnapshot)
    assert (salvaged.state, salvaged.generation, salvaged.profile) == ("active", 1, None)


def test_a_stored_profile_that_is_json_but_no_object_is_read_then_refused() -> None:
    snapshot = decode_route(R, _stored_route(profile='["claude"]'), KEY)
    assert snapshot.profile == ["claude"]
    with pytest.raises(CorruptProfileError, match="got an array"):
        profile_from_json(snapshot.route_id, snapshot.profile)


def test_another_stored_document_that_is_not_json_is_corrupt_naming_the_field() -> None:
    with pytest.raises(CorruptRouteError) as caught:
        decode_route(R, _stored_route(policy_snapshot="not json"), KEY)
    assert caught.value.field == "policy_snapshot"
    assert caught.value.reason.startswith(f"corrupt: {KEY} policy_snapshot: not JSON: ")


@pytest.mark.parametrize(
    ("field", "stored", "shown"),
    [
        ("generation", "not-a-number", "'not-a-number'"),
        ("state", "sideways", "'sideways'"),
        ("deadline", "tomorrow-ish", "'tomorrow-ish'"),
        ("candidate_id", "x" * 300, "'xxxx"),
        ("profile", "\udcff\udcfe", "not UTF-8"),
    ],
)
def test_a_field_that_does_not_decode_is_named_with_its_bad_value_shown_bounded(
    field: str, stored: str, shown: str
) -> None:
    with pytest.raises(CorruptRouteError) as caught:
        decode_route(R, _stored_route(**{field: stored}), KEY)
    assert caught.value.field == field
    assert shown in caught.value.detail
    assert len(caught.value.reason) < 400


def _started_with_profile(stored: JsonValue) -> tuple[MemoryRoutes, RouteSnapshot]:
    """A started route whose stored profile was then overwritten with `stored`."""
    routes = MemoryRoutes(ManualClock(T0))
    started(routes)
    corrupt = routes.snapshot(R).model_copy(update={"profile": stored})
    routes.routes[R] = corrupt
    return routes, corrupt


@pytest.mark.parametrize("stored", [None, {"candidates": "claude"}])
def test_a_failure_on_a_route_with_a_corrupt_profile_stops_the_route(stored: JsonValue) -> None:
    routes, _ = _started_with_profile(stored)
    after = routes.run(R, ReportFailure(1, overloaded(), safe_turn(), "kanban", f"inv-{R}"))
    assert after.state == "action_required"
    assert after.reason is not None
    assert after.reason.startswith("policy configuration error, fix the profile: ")


def test_a_skip_on_a_route_with_a_corrupt_profile_raises_corrupt_profile_error() -> None:
    _, corrupt = _started_with_profile({"candidates": "claude"})
    waiting = corrupt.model_copy(update={"state": "retry_wait"})
    with pytest.raises(CorruptProfileError) as caught:
        plan(waiting, SkipNow(1), RouteContext(T0))
    assert caught.value.route_id == R


def test_a_route_with_a_corrupt_profile_has_no_circuit_to_consult() -> None:
    _, corrupt = _started_with_profile({"candidates": "claude"})
    assert candidate_key(corrupt, CircuitBinding(installation_key=b"profiles-test")) is None
