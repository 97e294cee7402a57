"""Retry delays and the named built-in policies that run through the same evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from policy.document import (
    POLICY_VERSION,
    ClassPolicy,
    Outcome,
    PolicyDocument,
    RetryPolicy,
    WaitForResetPolicy,
)
from policy.errors import PolicyError

MAX_RETRY_DELAY_SECONDS: Final = 24 * 3600


def next_retry_delay(
    initial_interval_seconds: int, ordinal: int, *, cap_seconds: int = MAX_RETRY_DELAY_SECONDS
) -> int:
    """Seconds before retry number `ordinal + 1`: initial * 2**ordinal, at most `cap_seconds`.

    Ordinal 0 is the first retry. Any ordinal is safe: once the doubling passes the cap the
    cap is returned without computing the power.
    """
    if initial_interval_seconds < 1:
        raise PolicyError.single(
            "initial_interval_seconds", f"must be at least 1, got {initial_interval_seconds}"
        )
    if ordinal < 0:
        raise PolicyError.single("retry_ordinal", f"must not be negative, got {ordinal}")
    if cap_seconds < 1:
        raise PolicyError.single("cap_seconds", f"must be at least 1, got {cap_seconds}")
    if initial_interval_seconds >= cap_seconds or ordinal >= cap_seconds.bit_length():
        return cap_seconds
    return min(initial_interval_seconds << ordinal, cap_seconds)


def retry_delays(retry: RetryPolicy, *, cap_seconds: int = MAX_RETRY_DELAY_SECONDS) -> list[int]:
    """Every delay a retry policy implies, in order; empty when retrying is disabled."""
    if not retry.enabled:
        return []
    return [
        next_retry_delay(retry.initial_interval_seconds, n, cap_seconds=cap_seconds)
        for n in range(retry.max_retries)
    ]


@dataclass(frozen=True, slots=True)
class Limits:
    """Evaluator parameters v1 documents do not expose.

    `delay_cap_seconds` caps each retry delay. A reset hint is used when it is due within
    the document's `max_wait_seconds`; it must lie strictly in the future unless
    `reset_due_now_counts`, in which case a hint due exactly now is used with no delay.
    """

    delay_cap_seconds: int = MAX_RETRY_DELAY_SECONDS
    reset_due_now_counts: bool = False


DOCUMENT_LIMITS: Final = Limits()


@dataclass(frozen=True, slots=True)
class NamedPolicy:
    """A built-in policy: a v1 document plus the limits it runs with."""

    name: str
    document: PolicyDocument
    limits: Limits


INTERACTIVE_MAX_ATTEMPTS: Final = 5
INTERACTIVE_INITIAL_DELAY_SECONDS: Final = 5
INTERACTIVE_HORIZON_SECONDS: Final = 60

# Concrete profiles in interactive use: five retries at 5, 10, 20, 40 and 60 s, a trusted
# reset hint used only when 0–60 s away, then manual recovery. Hard failures stop at once:
# a concrete profile has no other candidate to skip to.
INTERACTIVE_POLICY: Final = NamedPolicy(
    name="interactive",
    document=PolicyDocument(
        version=POLICY_VERSION,
        transient=ClassPolicy(
            retry=RetryPolicy(
                enabled=True,
                max_retries=INTERACTIVE_MAX_ATTEMPTS,
                initial_interval_seconds=INTERACTIVE_INITIAL_DELAY_SECONDS,
            ),
            wait_for_reset=WaitForResetPolicy(
                enabled=True, max_wait_seconds=INTERACTIVE_HORIZON_SECONDS
            ),
            on_exhausted=Outcome.STOP,
        ),
        hard=ClassPolicy.immediately(Outcome.STOP),
    ),
    limits=Limits(delay_cap_seconds=INTERACTIVE_HORIZON_SECONDS, reset_due_now_counts=True),
)

BUILTIN_POLICIES: Final = MappingProxyType({INTERACTIVE_POLICY.name: INTERACTIVE_POLICY})
