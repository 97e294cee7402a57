"""Shared values for the circuit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from catalogue import Classification, Confidence, code_info
from catalogue.boundary import known_rule_codes
from circuits import CircuitSettings, CircuitState, record_failure

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SETTINGS = CircuitSettings()
EXACT = CircuitSettings(reset_jitter_s=0)  # no reset jitter: exact open-until times
TTL = timedelta(seconds=30)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def rule_of(code: str) -> str:
    """A shipped rule giving `code` (a report's classification must name one), else a
    test id (the circuit machine itself never reads the rule)."""
    rules = sorted(rule for rule, given in known_rule_codes().items() if given == code)
    return rules[0] if rules else f"test.{code}.v1"


def failure(
    code: str,
    *,
    reset_at: datetime | None = None,
    retry_after_s: float | None = None,
    confidence: Confidence = Confidence.HIGH,
) -> Classification:
    info = code_info(code)
    return Classification(
        code=code,
        error_class=info.error_class,
        confidence=confidence,
        scope=info.scope,
        rule=rule_of(code),
        reset_at=reset_at,
        retry_after_s=retry_after_s,
    )


def opened(now: datetime = T0, code: str = "quota_limited") -> CircuitState:
    state = record_failure(CircuitState(), failure(code), "route-a", now, SETTINGS)
    assert state.open_until is not None
    return state
