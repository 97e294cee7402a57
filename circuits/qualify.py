"""Which failures count against a shared circuit, and how hard.

Qualifying codes say the provider resource itself is broken. Transport loss (the agent's
own stream), unclassified failures, request-scope codes (context length, content policy,
invalid request) and failures that are not provider errors never count. Low-confidence
classifications (broad text patterns) never count either: one vague match must not park a
whole fleet.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final, Protocol

from catalogue.codes import Confidence
from circuits.settings import to_utc

HARD_OPEN_CODES: Final = frozenset(
    {
        "quota_limited",
        "subscription_required",
        "auth_required",
        "missing_credentials",
        "provider_not_configured",
        "model_unavailable",
    }
)
TRANSIENT_COUNTED_CODES: Final = frozenset(
    {
        "network_unavailable",
        "provider_unavailable",
        "provider_overloaded",
        "model_capacity",
        "rate_limited",
    }
)
QUALIFYING_CODES: Final = HARD_OPEN_CODES | TRANSIENT_COUNTED_CODES
RATE_LIMITED: Final = "rate_limited"


class FailureLike(Protocol):
    """What the machine reads of a failure; `Classification` and `policy.Failure` fit."""

    @property
    def code(self) -> str: ...

    @property
    def confidence(self) -> Confidence: ...

    @property
    def reset_at(self) -> datetime | None: ...

    @property
    def retry_after_s(self) -> float | None: ...


class Severity(StrEnum):
    """`ignored`: does not count; `counted`: counts towards the transient threshold;
    `opens`: opens the circuit at once."""

    IGNORED = "ignored"
    COUNTED = "counted"
    OPENS = "opens"


def trusted_reset(failure: FailureLike, now: datetime) -> datetime | None:
    """The failure's reset in UTC: `reset_at`, else now + `retry_after_s`; None when it
    has neither or the reset is not after `now`. The catalogue has already dropped hints
    that were unparseable or absurdly far."""
    now = to_utc(now)
    if failure.reset_at is not None:
        reset = to_utc(failure.reset_at)
    elif failure.retry_after_s is not None:
        reset = now + timedelta(seconds=failure.retry_after_s)
    else:
        return None
    return reset if reset > now else None


def severity(failure: FailureLike, now: datetime) -> Severity:
    """How the failure counts against its resource's circuit."""
    if failure.code not in QUALIFYING_CODES or failure.confidence is Confidence.LOW:
        return Severity.IGNORED
    if failure.code in HARD_OPEN_CODES:
        return Severity.OPENS
    if failure.code == RATE_LIMITED and trusted_reset(failure, now) is not None:
        return Severity.OPENS
    return Severity.COUNTED
