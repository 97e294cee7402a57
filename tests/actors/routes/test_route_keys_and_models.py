"""Key names, identifier validation, the route models and the errors (no Redis)."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from actors.errors import (
    InvalidIdentifierError,
    InvalidRouteIdError,
    InvalidStateError,
    RecoveryError,
    StaleGenerationError,
    StoreUnavailableError,
)
from actors.keys import AttemptFence, KeySpace
from actors.routes.models import (
    CycleRecord,
    RouteSnapshot,
    RouteUpdate,
    Transition,
    attempt_due,
    attempt_retrying,
)
from actors.routes.trusted import snapshot_of_validated
from actors.store.scripts import script
from catalogue.codes import ErrorClass
from policy.cycle import CycleUsage
from tests.actors.route_builders import T0, in_seconds, retry_wait, skip_now, start


def test_every_key_sits_under_the_configured_prefix() -> None:
    keys = KeySpace("tenant-a")
    assert keys.route("route-1") == "tenant-a:route:route-1"
    assert keys.attempts("route-1") == "tenant-a:attempts:route-1"
    assert keys.schedule("route-1") == "tenant-a:schedule:route-1"
    assert keys.schedules == "tenant-a:schedules"
    assert keys.events == "tenant-a:events"
    assert keys.host_routes("host-3") == "tenant-a:host:host-3:routes"
    assert keys.dispatch(AttemptFence("route-1", 2, 3)) == "tenant-a:dispatch:route-1:2:3"
    assert keys.pattern() == "tenant-a:*"


def test_the_default_prefix_is_recovery() -> None:
    assert KeySpace().events == "recovery:events"


def test_a_route_id_at_the_length_limit_with_every_allowed_character_is_accepted() -> None:
    route_id = ("Az09._-" * 19)[:128]
    assert KeySpace().route(route_id).endswith(route_id)


@pytest.mark.parametrize("route_id", ["", "a b", "a:b", "a*b", "a?", "[a]", "x" * 129, "é"])
def test_a_route_id_outside_the_alphabet_raises_an_error_naming_it(route_id: str) -> None:
    with pytest.raises(InvalidRouteIdError) as caught:
        KeySpace().route(route_id)
    assert caught.value.route_id == route_id
    assert repr(route_id) in str(caught.value)
    assert isinstance(caught.value, RecoveryError)


@pytest.mark.parametrize("prefix", ["", "a b", "a*", "ends:", "x" * 65])
def test_a_bad_key_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(InvalidIdentifierError, match="key prefix"):
        KeySpace(prefix)


def test_a_bad_host_id_or_a_negative_ordinal_is_refused() -> None:
    with pytest.raises(InvalidIdentifierError, match="host id"):
        KeySpace().host_routes("host:1")
    with pytest.raises(InvalidIdentifierError, match="attempt ordinal"):
        KeySpace().dispatch(AttemptFence("route-1", 1, -1))


def test_a_transition_with_a_bad_route_id_raises_the_typed_error_not_a_validation_error() -> None:
    with pytest.raises(InvalidRouteIdError):
        start("route 1")


def test_a_deadline_outside_a_waiting_state_is_refused() -> None:
    with pytest.raises(ValidationError, match="deadline needs a waiting state"):
        RouteUpdate(state="active", deadline=in_seconds(5))


def test_a_transition_cannot_write_the_state_none() -> None:
    with pytest.raises(ValidationError, match="cannot write the state 'none'"):
        RouteUpdate(state="none")


def test_deadlines_are_normalised_to_utc() -> None:
    paris = timezone(timedelta(hours=1))
    update = RouteUpdate(state="retry_wait", deadline=T0.astimezone(paris))
    assert update.deadline == T0
    assert update.deadline is not None
    assert update.deadline.utcoffset() == timedelta(0)


def test_a_created_route_starts_at_generation_1_and_a_skip_bumps_the_expected_one() -> None:
    assert start("route-1").generation == 1
    assert retry_wait("route-1", 4, deadline=in_seconds(5)).generation == 4
    assert skip_now("route-1", 4).generation == 5


def test_a_transition_needs_at_least_one_allowed_state() -> None:
    with pytest.raises(ValidationError):
        Transition(
            route_id="route-1", expected_generation=0, allowed_from=frozenset(),
            cause="start", route=RouteUpdate(state="active"),
        )  # fmt: skip


def test_a_cycle_record_round_trips_the_policy_cycle_usage() -> None:
    usage = CycleUsage(
        retries={("claude", ErrorClass.TRANSIENT): 2, ("codex", ErrorClass.HARD): 1},
        reset_waits=frozenset({("claude", ErrorClass.HARD)}),
        skipped=frozenset({"gemini"}),
    )
    record = CycleRecord.from_usage(usage)
    again = CycleRecord.model_validate_json(record.model_dump_json())
    assert again.to_usage() == usage


def test_errors_keep_their_identifiers_through_pickling() -> None:
    errors: list[RecoveryError] = [
        StaleGenerationError("route-1", 1, 2, "switching"),
        InvalidStateError("route-1", "active", ["retry_wait"], 3),
        StoreUnavailableError("apply", "ConnectionError: refused"),
        InvalidRouteIdError("a b", "[A-Za-z0-9._-]{1,128}"),
        InvalidIdentifierError("host id", "h:1", "[A-Za-z0-9._-]{1,64}"),
    ]
    for error in errors:
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error)
        assert vars(again) == vars(error)
        assert str(again) == str(error)


def test_the_transition_script_has_the_house_header() -> None:
    source = script("transition").source
    assert "-- KEYS:" in source
    assert "-- ARGV:" in source


def test_one_due_check_names_the_attempt_a_timer_a_backstop_and_a_probe_ask_about() -> None:
    deadline = datetime(2026, 1, 1, 12, tzinfo=UTC)
    waiting = RouteSnapshot(
        route_id="route-1", generation=2, state="retry_wait", attempt_ordinal=3,
        deadline=deadline,
    )  # fmt: skip
    fence = AttemptFence("route-1", 2, 3)
    assert waiting.attempt == fence
    assert attempt_due(waiting, fence, deadline)
    assert not attempt_due(waiting, fence, deadline - timedelta(microseconds=1)), "early"
    assert not attempt_due(waiting, AttemptFence("route-1", 2, 2), deadline), "an older attempt"
    assert not attempt_due(waiting, AttemptFence("route-1", 1, 3), deadline), "another generation"
    assert not attempt_due(waiting, AttemptFence("route-2", 2, 3), deadline), "another route"
    retrying = waiting.model_copy(update={"state": "retrying", "deadline": None})
    assert not attempt_due(retrying, fence, deadline), "no longer waiting"
    assert attempt_retrying(retrying, fence)
    assert not attempt_retrying(waiting, fence)


@pytest.mark.parametrize("next_step", [True, False])
def test_a_snapshot_of_validated_values_equals_the_validated_snapshot(next_step: bool) -> None:
    written = retry_wait("r1", 1, deadline=in_seconds(30))
    values = {
        **{name: getattr(written.route, name) for name in written.route.model_fields_set},
        "route_id": "r1", "generation": 1, "updated_at": T0,
    }  # fmt: skip
    if not next_step:
        values["next_step"] = None  # validation fills in the one the state implies
    validated = RouteSnapshot.model_validate(dict(values))
    trusted = snapshot_of_validated(
        {**dict.fromkeys(RouteSnapshot.model_fields), **validated.__dict__, **values}
    )
    assert trusted == validated
    assert trusted.next_step == validated.next_step is not None
    assert pickle.loads(pickle.dumps(trusted)) == validated
    partial = snapshot_of_validated(dict(validated.__dict__), {"route_id", "state"})
    assert partial.model_fields_set == {"route_id", "state"}
