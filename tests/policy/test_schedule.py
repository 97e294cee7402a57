"""Retry delays: initial x 2^ordinal, capped, safe for any ordinal; the interactive policy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy import (
    INTERACTIVE_POLICY,
    MAX_RETRY_DELAY_SECONDS,
    EffectSafety,
    PolicyError,
    Retry,
    Stop,
    WaitForReset,
    evaluate,
    next_retry_delay,
    retry_delays,
)
from tests.policy.builders import NOW, class_policy, failure

DAY = 24 * 3600


@pytest.mark.parametrize(
    ("initial", "ordinal", "expected"),
    [
        (5, 0, 5),
        (5, 1, 10),
        (5, 2, 20),
        (1, 0, 1),
        (1, 16, 65536),
        (1, 17, DAY),  # 131072 s would pass the cap
        (3600, 0, 3600),
        (3600, 4, 57600),
        (3600, 5, DAY),
        (3600, 64, DAY),
        (1, 64, DAY),
        (1, 10**6, DAY),
        (3600, 10**18, DAY),
    ],
)
def test_delay_doubles_from_the_initial_interval_and_stops_at_a_day(
    initial: int, ordinal: int, expected: int
) -> None:
    assert next_retry_delay(initial, ordinal) == expected


@pytest.mark.parametrize("ordinal", range(65))
def test_every_ordinal_up_to_64_gives_a_bounded_positive_delay(ordinal: int) -> None:
    delay = next_retry_delay(3600, ordinal)
    assert 3600 <= delay <= MAX_RETRY_DELAY_SECONDS


def test_a_delay_cap_below_the_initial_interval_returns_the_cap() -> None:
    assert next_retry_delay(3600, 0, cap_seconds=60) == 60


@pytest.mark.parametrize(
    ("initial", "ordinal", "field"),
    [
        (0, 0, "initial_interval_seconds"),
        (-5, 0, "initial_interval_seconds"),
        (5, -1, "retry_ordinal"),
    ],
)
def test_a_zero_interval_or_negative_ordinal_is_an_error_naming_the_value(
    initial: int, ordinal: int, field: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        next_retry_delay(initial, ordinal)
    assert caught.value.errors[0].field == field
    assert str(min(initial, ordinal)) in caught.value.errors[0].message


@given(
    initial=st.integers(min_value=1, max_value=3600),
    ordinal=st.integers(min_value=0, max_value=10**9),
)
def test_delays_never_decrease_with_the_ordinal_and_never_pass_a_day(
    initial: int, ordinal: int
) -> None:
    delay = next_retry_delay(initial, ordinal)
    assert initial <= delay <= DAY
    assert next_retry_delay(initial, ordinal + 1) >= delay


@given(
    initial=st.integers(min_value=1, max_value=3600),
    cap=st.integers(min_value=1, max_value=DAY),
    ordinal=st.integers(min_value=0, max_value=200),
)
def test_any_cap_bounds_every_delay(initial: int, cap: int, ordinal: int) -> None:
    assert next_retry_delay(initial, ordinal, cap_seconds=cap) <= cap


def test_retry_delays_lists_the_schedule_of_a_policy() -> None:
    assert retry_delays(class_policy(retries=3, interval=5).retry) == [5, 10, 20]
    assert retry_delays(class_policy().retry) == []


# -- the built-in interactive policy -----------------------------------------------------


def _interactive(code: str, ordinal: int, **hints: object) -> object:
    return evaluate(
        INTERACTIVE_POLICY,
        failure(code, **hints),
        now=NOW,
        safety=EffectSafety.safe(),
        retry_ordinal=ordinal,
    )


def test_interactive_policy_retries_five_times_at_5_10_20_40_60_seconds_then_stops() -> None:
    delays = []
    for ordinal in range(5):
        decision = _interactive("provider_overloaded", ordinal)
        assert isinstance(decision, Retry)
        assert decision.ordinal == ordinal + 1
        delays.append((decision.deadline - NOW).total_seconds())
    assert delays == [5, 10, 20, 40, 60]
    assert isinstance(_interactive("provider_overloaded", 5), Stop)


@pytest.mark.parametrize(
    ("retry_after_s", "waits"),
    [(0, True), (1, True), (30, True), (60, True), (60.5, False), (61, False), (3600, False)],
)
def test_interactive_policy_uses_a_reset_hint_only_when_0_to_60_seconds_away(
    retry_after_s: float, waits: bool
) -> None:
    decision = _interactive("rate_limited", 0, retry_after_s=retry_after_s)
    if waits:
        assert isinstance(decision, WaitForReset)
        assert decision.deadline == NOW + timedelta(seconds=retry_after_s)
    else:
        assert isinstance(decision, Retry)


def test_interactive_policy_ignores_a_reset_in_the_past() -> None:
    decision = _interactive("rate_limited", 0, reset_at=(NOW - timedelta(seconds=1)).isoformat())
    assert isinstance(decision, Retry)


def test_interactive_policy_stops_hard_failures_for_manual_recovery() -> None:
    assert isinstance(_interactive("quota_limited", 0, retry_after_s=10), Stop)


def test_interactive_policy_is_a_v1_document_with_two_extra_limits() -> None:
    document = INTERACTIVE_POLICY.document
    assert retry_delays(document.transient.retry, cap_seconds=60) == [5, 10, 20, 40, 60]
    assert document.transient.wait_for_reset.max_wait_seconds == 60
    assert INTERACTIVE_POLICY.limits.delay_cap_seconds == 60
    assert INTERACTIVE_POLICY.limits.reset_due_now_counts
