"""An operator's overrides: open until a chosen time, close, from every circuit state."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from circuits import (
    OPERATOR_REASON,
    CircuitSettings,
    CircuitState,
    CircuitStatus,
    ProbeGrant,
    acquire_probe,
    holds_probe,
    is_eligible,
    operator_close,
    operator_open,
    record_failure,
    record_probe_result,
)
from tests.circuits.builders import SETTINGS, T0, TTL, at, failure, opened

CLOSED = CircuitState()


def counting() -> CircuitState:
    """Closed, with one transient failure counted."""
    state = record_failure(CLOSED, failure("provider_overloaded"), "route-a", T0, SETTINGS)
    assert state.status is CircuitStatus.CLOSED
    assert state.recent_failures
    return state


def probing() -> tuple[CircuitState, ProbeGrant]:
    state = opened()
    assert state.open_until is not None
    probing, grant = acquire_probe(state, "route-p", state.open_until, TTL)
    assert isinstance(grant, ProbeGrant)
    return probing, grant


def test_operator_open_opens_a_closed_circuit_until_exactly_the_given_time() -> None:
    until = at(600)
    state = operator_open(counting(), until, T0, SETTINGS)
    assert state.status is CircuitStatus.OPEN
    assert (state.opened_at, state.open_until, state.reason) == (T0, until, OPERATOR_REASON)
    assert state.recent_failures == ()
    assert not is_eligible(state, at(599))


def test_operator_open_moves_an_open_circuits_open_until_earlier_as_well_as_later() -> None:
    state = opened()
    assert state.open_until is not None
    earlier = state.open_until - timedelta(seconds=30)
    shortened = operator_open(state, earlier, at(1), SETTINGS)
    assert shortened.open_until == earlier
    assert shortened.opened_at == state.opened_at  # it has been open since then
    lengthened = operator_open(state, at(7200), at(1), SETTINGS)
    assert lengthened.open_until == at(7200)


def test_operator_open_drops_a_probe_lease_so_the_late_verdict_changes_nothing() -> None:
    half_open, grant = probing()
    now = grant.expires_at - timedelta(seconds=1)
    state = operator_open(half_open, now + timedelta(hours=1), now, SETTINGS)
    assert (state.status, state.lease) == (CircuitStatus.OPEN, None)
    assert state.lease_epoch == half_open.lease_epoch
    assert not holds_probe(state, grant.owner_token, now)
    after = record_probe_result(state, grant.owner_token, True, now, SETTINGS)
    assert after == state


def test_operator_open_keeps_the_backoff_step() -> None:
    half_open, grant = probing()
    assert half_open.open_until is not None
    now = half_open.open_until
    reopened = record_probe_result(half_open, grant.owner_token, False, now, SETTINGS)
    assert reopened.failed_probes == 1
    assert operator_open(reopened, now + timedelta(hours=1), now, SETTINGS).failed_probes == 1


@pytest.mark.parametrize("seconds", [0, -1])
def test_operator_open_refuses_an_until_that_is_not_after_now(seconds: int) -> None:
    until = at(seconds)
    expected = f"until {until.isoformat()} must be after now ({T0.isoformat()})"
    with pytest.raises(ValueError, match=re.escape(expected)):
        operator_open(CLOSED, until, T0, SETTINGS)


def test_operator_open_refuses_an_until_beyond_max_open_s() -> None:
    settings = CircuitSettings(max_open_s=3600)
    assert operator_open(CLOSED, at(3600), T0, settings).open_until == at(3600)
    with pytest.raises(ValueError, match=r"beyond max_open_s \(3600 s\) from now"):
        operator_open(CLOSED, at(3601), T0, settings)


def test_operator_open_refuses_a_naive_until() -> None:
    with pytest.raises(ValueError, match="must be timezone-aware"):
        operator_open(CLOSED, at(60).replace(tzinfo=None), T0, SETTINGS)


@pytest.mark.parametrize("state", [opened(), probing()[0], counting()], ids=str)
def test_operator_close_leaves_what_a_probe_success_leaves(state: CircuitState) -> None:
    closed = operator_close(state)
    assert closed == CircuitState(lease_epoch=state.lease_epoch)
    assert is_eligible(closed, T0)


def test_operator_close_of_a_probing_circuit_equals_the_probes_own_success() -> None:
    half_open, grant = probing()
    succeeded = record_probe_result(half_open, grant.owner_token, True, at(61), SETTINGS)
    assert operator_close(half_open) == succeeded


def test_operator_close_of_a_closed_circuit_with_nothing_counted_changes_nothing() -> None:
    assert operator_close(CLOSED) == CLOSED
