"""The circuit state machine: qualification, thresholds, backoff, open-until, probe lease."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from catalogue import CODES, Confidence
from circuits import (
    HARD_OPEN_CODES,
    QUALIFYING_CODES,
    CircuitSettings,
    CircuitState,
    CircuitStatus,
    DenialReason,
    ProbeDenied,
    ProbeGrant,
    abandon_probe,
    acquire_probe,
    holds_probe,
    is_eligible,
    next_change_at,
    record_failure,
    record_probe_result,
)
from tests.circuits.builders import EXACT, SETTINGS, T0, TTL, at, failure, opened

CLOSED = CircuitState()
TRANSIENT = ("network_unavailable", "provider_unavailable", "provider_overloaded", "model_capacity")


def grant_of(result: ProbeGrant | ProbeDenied) -> ProbeGrant:
    assert isinstance(result, ProbeGrant), result
    return result


def denial_of(result: ProbeGrant | ProbeDenied) -> ProbeDenied:
    assert isinstance(result, ProbeDenied), result
    return result


def half_open(now_s: float = 60, caller: str = "route-p") -> tuple[CircuitState, ProbeGrant]:
    state, result = acquire_probe(opened(), caller, at(now_s), TTL)
    return state, grant_of(result)


# -- qualification ---------------------------------------------------------------------


def test_the_qualifying_codes_are_exactly_the_provider_resource_codes() -> None:
    assert {
        "auth_required",
        "missing_credentials",
        "subscription_required",
        "provider_not_configured",
        "rate_limited",
        "quota_limited",
        "network_unavailable",
        "model_capacity",
        "provider_unavailable",
        "provider_overloaded",
        "model_unavailable",
    } == QUALIFYING_CODES
    assert set(CODES) >= QUALIFYING_CODES


@pytest.mark.parametrize("code", sorted(set(CODES) - QUALIFYING_CODES))
def test_non_qualifying_codes_never_touch_the_circuit(code: str) -> None:
    state = CLOSED
    for i, route in enumerate(["a", "b", "c", "d", "a", "b"]):
        state = record_failure(state, failure(code, retry_after_s=30), route, at(i), SETTINGS)
    assert state == CLOSED


def test_unclassified_and_low_confidence_failures_do_not_count() -> None:
    low = failure("quota_limited", confidence=Confidence.LOW)
    assert record_failure(CLOSED, low, "a", T0, SETTINGS) == CLOSED
    unclassified = failure("network_unavailable").model_copy(update={"code": "unclassified"})
    assert record_failure(CLOSED, unclassified, "a", T0, SETTINGS) == CLOSED


@pytest.mark.parametrize("code", sorted(HARD_OPEN_CODES))
def test_hard_scope_codes_open_at_once(code: str) -> None:
    state = record_failure(CLOSED, failure(code), "a", T0, SETTINGS)
    assert state.status is CircuitStatus.OPEN
    assert state.reason == code
    assert state.open_until == at(60)
    assert not is_eligible(state, T0)


def test_a_rate_limit_with_a_reset_opens_at_once_until_the_reset() -> None:
    state = record_failure(CLOSED, failure("rate_limited", retry_after_s=300), "a", T0, EXACT)
    assert state.status is CircuitStatus.OPEN
    assert state.open_until == at(300)


def test_a_short_hint_beats_the_first_backoff() -> None:
    """Hints before backoff: Retry-After 2 opens for 2 s, not for the 60 s backoff."""
    state = record_failure(CLOSED, failure("rate_limited", retry_after_s=2), "a", T0, EXACT)
    assert state.open_until == at(2)


@pytest.mark.parametrize("wait_s", [2, 30, 3600, 86_400])
def test_the_reset_jitter_is_small_deterministic_and_never_before_the_reset(wait_s: float) -> None:
    hint = failure("quota_limited", retry_after_s=wait_s)
    seeds = [f"resource-{i}" for i in range(40)]
    until = [record_failure(CLOSED, hint, "a", T0, SETTINGS, seed=s).open_until for s in seeds]
    again = [record_failure(CLOSED, hint, "a", T0, SETTINGS, seed=s).open_until for s in seeds]
    assert until == again
    span = min(SETTINGS.reset_jitter_s, SETTINGS.reset_jitter_fraction * wait_s)
    assert all(u is not None and at(wait_s) <= u <= at(wait_s + span) for u in until)
    assert len(set(until)) > 30  # circuits sharing one reset do not expire together


@pytest.mark.parametrize("code", [*TRANSIENT, "rate_limited"])
def test_one_transient_failure_only_counts(code: str) -> None:
    state = record_failure(CLOSED, failure(code), "a", T0, SETTINGS)
    assert state.status is CircuitStatus.CLOSED
    assert [m.route_id for m in state.recent_failures] == ["a"]


def test_a_reset_in_the_past_is_not_a_reset() -> None:
    stale = failure("rate_limited", reset_at=at(-5))
    assert record_failure(CLOSED, stale, "a", T0, SETTINGS).status is CircuitStatus.CLOSED


# -- thresholds ------------------------------------------------------------------------


def feed(events: list[tuple[str, float]], settings: CircuitSettings = SETTINGS) -> CircuitState:
    state = CLOSED
    for route, seconds in events:
        state = record_failure(state, failure("provider_overloaded"), route, at(seconds), settings)
    return state


@pytest.mark.parametrize(
    ("events", "status"),
    [
        ([("a", 0), ("a", 1)], CircuitStatus.CLOSED),
        ([("a", 0), ("b", 1)], CircuitStatus.CLOSED),
        ([("a", 0), ("a", 1), ("a", 2), ("a", 3)], CircuitStatus.CLOSED),
        ([("a", 0), ("a", 10), ("b", 20)], CircuitStatus.OPEN),
        ([("a", 0), ("b", 30), ("c", 59.9)], CircuitStatus.OPEN),
        ([("a", 0), ("b", 30), ("c", 60)], CircuitStatus.CLOSED),
        ([("a", 0), ("b", 61), ("c", 62)], CircuitStatus.CLOSED),
        ([("a", 0), ("b", 61), ("c", 62), ("a", 63)], CircuitStatus.OPEN),
    ],
)
def test_transient_failures_open_after_three_within_a_minute_from_two_routes(
    events: list[tuple[str, float]], status: CircuitStatus
) -> None:
    assert feed(events).status is status


def test_failures_outside_the_window_are_forgotten() -> None:
    state = feed([("a", 0), ("b", 10), ("c", 65)])
    assert [m.route_id for m in state.recent_failures] == ["b", "c"]


def test_thresholds_are_configurable() -> None:
    strict = CircuitSettings(transient_threshold=2, min_distinct_routes=1, transient_window_s=5)
    assert feed([("a", 0), ("a", 4)], strict).status is CircuitStatus.OPEN
    assert feed([("a", 0), ("a", 5)], strict).status is CircuitStatus.CLOSED


def test_the_remembered_failures_are_bounded() -> None:
    settings = CircuitSettings(max_recent_failures=5, min_distinct_routes=2)
    state = feed([("a", i / 10) for i in range(20)], settings)
    # one route never opens it: its newest threshold's worth is all that can still count
    assert [m.at for m in state.recent_failures] == [at(1.7), at(1.8), at(1.9)]
    wide = CircuitSettings(max_recent_failures=5, transient_threshold=5, min_distinct_routes=9)
    state = feed([(f"r{i}", i / 10) for i in range(20)], wide)
    assert len(state.recent_failures) == 5


def test_the_threshold_opening_honours_the_latest_reset_in_the_window() -> None:
    state = record_failure(CLOSED, failure("model_capacity", retry_after_s=600), "a", T0, EXACT)
    state = record_failure(state, failure("model_capacity"), "b", at(1), EXACT)
    state = record_failure(state, failure("model_capacity"), "b", at(2), EXACT)
    assert state.status is CircuitStatus.OPEN
    assert state.open_until == at(600)
    assert state.recent_failures == ()


@pytest.mark.parametrize(
    "changes",
    [
        {"transient_threshold": 0},
        {"initial_backoff_s": 120, "max_backoff_s": 60},
        {"max_open_s": 10},
        {"max_recent_failures": 2},
        {"surprise": 1},
    ],
)
def test_inconsistent_settings_are_rejected(changes: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        CircuitSettings.model_validate(changes)


# -- open-until ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reset_s", "open_until_s"),
    [
        (None, 60),
        (30, 30),
        (3600, 3600),
        (6 * 86_400, 6 * 86_400),
        (29 * 86_400, 29 * 86_400),
        (31 * 86_400, 30 * 86_400),
    ],
)
def test_open_until_is_the_trusted_reset_else_the_backoff_within_thirty_days(
    reset_s: float | None, open_until_s: float
) -> None:
    reset = None if reset_s is None else at(reset_s)
    state = record_failure(CLOSED, failure("quota_limited", reset_at=reset), "a", T0, EXACT)
    assert state.open_until == at(open_until_s)


def test_a_later_reset_while_open_extends_but_never_shortens() -> None:
    state = opened()
    longer = record_failure(state, failure("quota_limited", reset_at=at(900)), "b", at(5), EXACT)
    assert longer.open_until == at(900)
    newest = record_failure(longer, failure("quota_limited", reset_at=at(1800)), "b", at(6), EXACT)
    assert newest.open_until == at(1800)
    shorter = record_failure(newest, failure("rate_limited", retry_after_s=10), "c", at(6), EXACT)
    assert shorter == newest
    plain = record_failure(newest, failure("network_unavailable"), "c", at(7), EXACT)
    assert plain == newest


def test_a_failure_while_half_open_leaves_the_decision_to_the_probe() -> None:
    state, _ = half_open()
    assert record_failure(state, failure("quota_limited"), "z", at(61), SETTINGS) == state


# -- probe lease -----------------------------------------------------------------------


def test_a_closed_circuit_grants_no_probe_lease() -> None:
    state, result = acquire_probe(CLOSED, "a", T0, TTL)
    assert state == CLOSED
    assert denial_of(result).reason is DenialReason.CLOSED


def test_an_open_circuit_grants_no_lease_before_open_until() -> None:
    state = opened()
    same, result = acquire_probe(state, "a", at(59), TTL)
    assert same == state
    denial = denial_of(result)
    assert denial.reason is DenialReason.COOLING_DOWN
    assert denial.retry_at == at(60)


def test_after_expiry_exactly_one_caller_gets_the_lease() -> None:
    state = opened()
    grants = []
    for caller in ["r1", "r2", "r3", "r4"]:
        state, result = acquire_probe(state, caller, at(60), TTL)
        grants.append(result)
    assert [type(g).__name__ for g in grants] == ["ProbeGrant"] + ["ProbeDenied"] * 3
    assert state.status is CircuitStatus.HALF_OPEN
    denial = denial_of(grants[1])
    assert (denial.reason, denial.holder, denial.retry_at) == (DenialReason.HELD, "r1", at(90))
    assert not is_eligible(state, at(60))
    assert next_change_at(state) == at(90)


def test_the_holder_asking_again_gets_its_own_lease_back_unextended() -> None:
    state, grant = half_open()
    again, result = acquire_probe(state, "route-p", at(80), TTL)
    assert again == state
    assert grant_of(result) == grant


def test_an_expired_lease_passes_to_exactly_one_new_caller_with_a_new_token() -> None:
    state, first = half_open()
    state, taken = acquire_probe(state, "r2", at(90), TTL)
    state, lost = acquire_probe(state, "r3", at(90), TTL)
    second = grant_of(taken)
    assert denial_of(lost).holder == "r2"
    assert second.owner_token != first.owner_token
    assert state.lease_epoch == 2


def test_the_same_caller_after_expiry_gets_a_new_token() -> None:
    state, first = half_open()
    state, result = acquire_probe(state, "route-p", at(95), TTL)
    assert grant_of(result).owner_token != first.owner_token


def test_probe_success_closes_and_resets_the_backoff() -> None:
    state, grant = half_open()
    assert holds_probe(state, grant.owner_token, at(70))
    closed = record_probe_result(state, grant.owner_token, True, at(70), SETTINGS)
    assert closed == CircuitState(lease_epoch=1)
    assert is_eligible(closed, at(70))
    assert next_change_at(closed) is None


def test_a_stale_owners_late_result_is_ignored() -> None:
    state, first = half_open()
    state, second = acquire_probe(state, "r2", at(100), TTL)
    assert record_probe_result(state, first.owner_token, True, at(101), SETTINGS) == state
    assert record_probe_result(state, first.owner_token, False, at(101), SETTINGS) == state
    closed = record_probe_result(state, grant_of(second).owner_token, True, at(102), SETTINGS)
    assert closed.status is CircuitStatus.CLOSED


def test_a_result_after_the_lease_expired_is_ignored() -> None:
    state, grant = half_open()
    assert record_probe_result(state, grant.owner_token, True, at(90), SETTINGS) == state
    assert record_probe_result(CLOSED, grant.owner_token, True, at(61), SETTINGS) == CLOSED


def test_probe_failures_back_off_one_two_four_minutes_up_to_an_hour() -> None:
    state = opened()
    now = state.open_until
    backoffs = []
    for _ in range(9):
        assert now is not None
        state, result = acquire_probe(state, "p", now, TTL)
        state = record_probe_result(state, grant_of(result).owner_token, False, now, SETTINGS)
        assert state.status is CircuitStatus.OPEN
        assert state.open_until is not None
        backoffs.append((state.open_until - now) / timedelta(minutes=1))
        now = state.open_until
    assert backoffs == [2, 4, 8, 16, 32, 60, 60, 60, 60]
    assert state.failed_probes == 9
    assert state.opened_at == T0


def test_a_failed_probe_honours_its_trusted_reset_within_the_cap() -> None:
    state, grant = half_open()
    reopened = record_probe_result(
        state, grant.owner_token, False, at(61), EXACT, reset_at=at(61 + 40 * 86_400)
    )
    assert reopened.open_until == at(61 + 30 * 86_400)
    state, grant = half_open()
    reopened = record_probe_result(
        state, grant.owner_token, False, at(61), EXACT, reset_at=at(61 + 900)
    )
    assert reopened.open_until == at(61 + 900)


def test_after_closing_the_backoff_starts_again_at_one_minute() -> None:
    state, grant = half_open()
    state = record_probe_result(state, grant.owner_token, False, at(60), SETTINGS)
    state, result = acquire_probe(state, "p", at(180), TTL)
    state = record_probe_result(state, grant_of(result).owner_token, True, at(181), SETTINGS)
    state = record_failure(state, failure("auth_required"), "a", at(200), SETTINGS)
    assert state.open_until == at(260)


def test_an_abandoned_probe_lets_the_next_caller_in_at_once() -> None:
    state, grant = half_open()
    assert abandon_probe(state, "1:someone-else", at(61)) == state
    state = abandon_probe(state, grant.owner_token, at(61))
    assert state.status is CircuitStatus.OPEN
    state, result = acquire_probe(state, "r2", at(61), TTL)
    assert grant_of(result).holder == "r2"


@pytest.mark.parametrize(
    ("status", "changes"),
    [
        ("closed", {"open_until": T0}),
        ("closed", {"failed_probes": 1}),
        ("open", {}),
        ("open", {"opened_at": T0, "open_until": T0, "lease": None, "recent_failures": [1]}),
        ("half_open", {"opened_at": T0, "open_until": T0}),
    ],
)
def test_inconsistent_states_are_rejected(status: str, changes: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        CircuitState.model_validate({"status": status, **changes})


def test_states_round_trip_through_json_in_utc() -> None:
    state, _ = half_open()
    restored = CircuitState.model_validate_json(state.model_dump_json())
    assert restored == state
    paris = CircuitState.model_validate(
        {"status": "open", "opened_at": "2025-03-01T13:00:00+01:00", "open_until": T0}
    )
    assert paris.opened_at == T0
    assert paris.opened_at is not None
    assert paris.opened_at.utcoffset() == timedelta(0)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="must be timezone-aware"):
        record_failure(CLOSED, failure("quota_limited"), "a", T0.replace(tzinfo=None), SETTINGS)


@pytest.mark.parametrize(("caller", "ttl"), [("", TTL), ("a", timedelta(0))])
def test_a_lease_needs_a_caller_and_a_positive_ttl(caller: str, ttl: timedelta) -> None:
    with pytest.raises(ValueError, match="must"):
        acquire_probe(opened(), caller, at(60), ttl)


# -- a provider-wide circuit fed by its models' failures ----------------------------------


def _on(state: CircuitState, model: str, route: str, seconds: float) -> CircuitState:
    unavailable = failure("provider_unavailable")
    return record_failure(state, unavailable, route, at(seconds), EXACT, model=model, min_models=2)


def test_one_failing_model_never_opens_the_provider_wide_circuit() -> None:
    state = CLOSED
    for second, route in enumerate(["a", "b", "c", "d", "e", "f"]):
        state = _on(state, "primary", route, second)
    assert state.status is CircuitStatus.CLOSED


def test_two_failing_models_within_the_window_open_the_provider_wide_circuit() -> None:
    state = CLOSED
    for second, route in enumerate(["a", "b", "c"]):
        state = _on(state, "primary", route, second)
    state = _on(state, "fallback", "d", 3)
    state = _on(state, "fallback", "e", 4)
    assert state.status is CircuitStatus.CLOSED
    state = _on(state, "fallback", "f", 5)
    assert state.status is CircuitStatus.OPEN
    assert state.open_until == at(5 + EXACT.initial_backoff_s)


def test_a_second_model_failing_after_the_window_does_not_open_it() -> None:
    state = CLOSED
    for second, route in enumerate(["a", "b", "c"]):
        state = _on(state, "primary", route, second)
    for offset, route in enumerate(["d", "e", "f"]):
        state = _on(state, "fallback", route, EXACT.transient_window_s + 5 + offset)
    assert state.status is CircuitStatus.CLOSED


def test_hard_failures_of_two_models_open_it_one_each() -> None:
    gone = failure("model_unavailable")
    state = record_failure(CLOSED, gone, "a", T0, EXACT, model="x", min_models=2)
    assert state.status is CircuitStatus.CLOSED
    state = record_failure(state, gone, "a", at(1), EXACT, model="y", min_models=2)
    assert state.status is CircuitStatus.OPEN


def test_models_failures_on_the_provider_wide_circuit_never_count_toward_its_own_threshold() -> (
    None
):
    # Several accounts' routes see one model overloaded: on the provider-wide circuit
    # those marks wait for a second failing model. One unreachable-provider failure
    # (which counts there directly) must not open it on their strength.
    state = CLOSED
    for n, route in enumerate(("a", "b", "c", "d")):
        state = record_failure(state, failure("provider_overloaded"), route, at(n), SETTINGS,
                               model="m1", min_models=2)  # fmt: skip
    state = record_failure(state, failure("network_unavailable"), "e", at(5), SETTINGS)
    assert state.status is CircuitStatus.CLOSED
    state = record_failure(state, failure("network_unavailable"), "f", at(6), SETTINGS)
    state = record_failure(state, failure("network_unavailable"), "g", at(7), SETTINGS)
    assert state.status is CircuitStatus.OPEN
