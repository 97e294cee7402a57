"""The evaluator: one failure, one candidate's policy, one decision.

Order (docs/DESIGN.md §2, the seed's Per-class policy): refuse stale, unclassified,
low-confidence, unknown or conflicting, class-`none` and effect-unsafe failures (Stop);
then a reset wait if enabled, unused for this candidate and class in the cycle, and the
trusted reset is in the future and no later than `max_wait_seconds`; then a retry while the
budget lasts; then `on_exhausted`. Request-scope hard codes go straight to `on_exhausted`:
repeating the request cannot help, and a larger context window elsewhere may
(context_length_exceeded). A safety refusal (content_policy) is never routed around: it
stops for manual recovery whatever the policy says, as the provider's reason (kept in the
classification's safe excerpt) is for a person to read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Final

from catalogue.codes import CODES, UNCLASSIFIED, CodeInfo, Confidence, ErrorClass, Scope
from policy.decisions import Decision, Retry, Skip, Stop, WaitForReset, utc_iso
from policy.document import ClassPolicy, Outcome, PolicyDocument, WaitForResetPolicy
from policy.durations import format_duration
from policy.errors import PolicyError
from policy.failure import Failure
from policy.gate import EffectSafety
from policy.schedule import DOCUMENT_LIMITS, Limits, NamedPolicy, next_retry_delay

# Hard codes about this request only: retrying or waiting on the same candidate cannot help.
REQUEST_SCOPE_CODES: Final = frozenset(
    code
    for code, info in CODES.items()
    if info.error_class is ErrorClass.HARD and info.scope is Scope.REQUEST
)
# Evidence about the agent's own transport: it may repeat the turn on the same candidate,
# but never authorises handing the prompt to another one.
SAME_CANDIDATE_ONLY_CODES: Final = frozenset({"agent_transport_lost"})
# A provider's safety refusal: neither retried nor handed to another candidate (which
# would route around the refusal); the route stops for a person.
MANUAL_RECOVERY_CODES: Final = frozenset({"content_policy"})


def evaluate(
    policy: PolicyDocument | NamedPolicy,
    failure: Failure,
    *,
    now: datetime,
    safety: EffectSafety,
    retry_ordinal: int = 0,
    reset_wait_used: bool = False,
) -> Decision:
    """The decision for `failure` under one candidate's policy.

    `retry_ordinal`: retries already used for this candidate and the failure's class in the
    current cycle. `reset_wait_used`: whether this candidate and class already waited for a
    reset in the cycle. `now` must be timezone-aware; deadlines are in UTC.
    """
    document, limits = _unpack(policy)
    now = _utc_now(now)
    if retry_ordinal < 0:
        raise PolicyError.single("retry_ordinal", f"must not be negative, got {retry_ordinal}")
    refusal = refusal_reason(failure, safety)
    if refusal is not None:
        return Stop(reason=refusal)
    section = document.for_class(failure.error_class)
    label = f"{failure.code} ({failure.error_class.value})"
    if (request_scope := _request_scope_decision(section, failure, safety, label)) is not None:
        return request_scope
    if not safety.same_candidate:
        return _exhausted(section, failure, safety, f"{label}: {safety.reason}")
    wait, note = _reset_wait(section.wait_for_reset, failure, now, reset_wait_used, limits)
    if wait is not None:
        return WaitForReset(deadline=wait, reason=f"{label}: {note}")
    retry = section.retry
    if retry.enabled and retry_ordinal < retry.max_retries:
        delay = next_retry_delay(
            retry.initial_interval_seconds, retry_ordinal, cap_seconds=limits.delay_cap_seconds
        )
        ordinal = retry_ordinal + 1
        return Retry(
            deadline=_after(now, delay),
            ordinal=ordinal,
            reason=f"{label}: retry {ordinal} of {retry.max_retries} after "
            f"{format_duration(delay)}{_also(note)}",
        )
    used = f"all {retry.max_retries} retries used" if retry.enabled else "retrying is disabled"
    return _exhausted(section, failure, safety, f"{label}: {used}{_also(note)}")


def _request_scope_decision(
    section: ClassPolicy, failure: Failure, safety: EffectSafety, label: str
) -> Decision | None:
    """What a request-scope hard code decides before any retry or wait, else None."""
    if failure.code in MANUAL_RECOVERY_CODES:
        return Stop(
            reason=f"{label}: the provider's safety system refused this request; a refusal is "
            "never retried or routed to another candidate, so stop for manual recovery"
        )
    if failure.code in REQUEST_SCOPE_CODES:
        why = f"{label}: repeating the same request cannot help"
        return _exhausted(section, failure, safety, why)
    return None


def refusal_reason(failure: Failure, safety: EffectSafety) -> str | None:
    """Why no policy may act on this failure at all, or None. Checked in this order."""
    code, claimed = failure.code, failure.error_class
    info = CODES.get(code)
    checks: tuple[tuple[bool, Callable[[], str]], ...] = (
        (
            failure.stale,
            lambda: "stale failure: it belongs to an earlier invocation or prompt generation",
        ),
        (
            claimed is ErrorClass.UNCLASSIFIED or code == UNCLASSIFIED,
            lambda: "unclassified failure: no catalogue rule matched, so automatic recovery stops",
        ),
        (
            failure.confidence is Confidence.LOW,
            lambda: f"{code}: low-confidence evidence counts as unclassified",
        ),
        (
            info is None,
            lambda: f"unknown code {code!r}: it has no class, so automatic recovery stops",
        ),
        (
            info is not None and info.error_class is not claimed,
            lambda: f"conflicting evidence: {code} is {_class_name(info)}, not {claimed.value}",
        ),
        (claimed is ErrorClass.NONE, lambda: _never_recovered(code)),
        (not safety.same_candidate and not safety.other_candidate, lambda: safety.reason),
    )
    return next((reason() for refused, reason in checks if refused), None)


def _class_name(info: CodeInfo | None) -> str:
    return "unregistered" if info is None else info.error_class.value


def _never_recovered(code: str) -> str:
    info = CODES[code]
    if info.is_provider_error:
        return f"{code}: {info.summary}; no automatic recovery can fix it"
    return f"{code} is not a provider error: it never retries or switches candidates"


def reset_offset(failure: Failure, now: datetime) -> float | None:
    """Seconds from `now` to the trusted reset: `reset_at`, else now + `retry_after_s`; with
    both, the later. None when the failure carries no timing hint."""
    offsets = []
    if failure.reset_at is not None:
        offsets.append((failure.reset_at - now).total_seconds())
    if failure.retry_after_s is not None:
        offsets.append(failure.retry_after_s)
    return max(offsets) if offsets else None


def stop_for_invalid_policy(error: PolicyError) -> Stop:
    """Invalid stored policy data is a configuration error that never authorises work."""
    return Stop(reason=f"policy configuration error, fix the profile: {error}")


def _reset_wait(
    wait: WaitForResetPolicy,
    failure: Failure,
    now: datetime,
    used: bool,
    limits: Limits,
) -> tuple[datetime | None, str]:
    """The reset deadline to wait for, or None with a note on why no wait applies."""
    offset = reset_offset(failure, now)
    if not wait.enabled or offset is None:
        return None, ""
    if used:
        return None, "the reset wait for this class was already used in this cycle"
    if offset > wait.max_wait_seconds:
        return None, (
            f"the reset in {format_duration(offset)} is beyond the "
            f"{format_duration(wait.max_wait_seconds)} maximum wait, so it is not waited for"
        )
    if failure.reset_at is not None and (failure.reset_at - now).total_seconds() == offset:
        deadline = failure.reset_at.astimezone(UTC)
    else:
        deadline = _after(now, max(offset, 0.0))
    # Judged on the deadline, not the offset: a hint shorter than a microsecond is now.
    if offset < 0 or (deadline <= now and not limits.reset_due_now_counts):
        return None, "the reset hint is not in the future, so it is ignored"
    note = (
        f"wait for the trusted reset at {utc_iso(deadline)}, {format_duration(offset)} away "
        f"(at most {format_duration(wait.max_wait_seconds)}), once this cycle"
    )
    return deadline, note


def _exhausted(section: ClassPolicy, failure: Failure, safety: EffectSafety, why: str) -> Decision:
    if section.on_exhausted is Outcome.STOP:
        return Stop(reason=f"{why}; stop for manual recovery")
    if failure.code in SAME_CANDIDATE_ONLY_CODES:
        return Stop(reason=f"{why}; {failure.code} never authorises switching candidates, so stop")
    if not safety.other_candidate:
        return Stop(reason=f"{why}; the turn may not go to another candidate, so stop")
    return Skip(reason=f"{why}; skip to the next candidate")


def _also(note: str) -> str:
    return f" ({note})" if note else ""


def _unpack(policy: PolicyDocument | NamedPolicy) -> tuple[PolicyDocument, Limits]:
    if isinstance(policy, NamedPolicy):
        return policy.document, policy.limits
    return policy, DOCUMENT_LIMITS


def _utc_now(now: datetime) -> datetime:
    if now.utcoffset() is None:
        raise PolicyError.single("now", f"must be timezone-aware, got {now.isoformat()}")
    return now.astimezone(UTC)


def _after(now: datetime, seconds: float) -> datetime:
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        raise PolicyError.single(
            "now", f"{now.isoformat()} + {seconds:g} s is beyond the last representable time"
        ) from None
