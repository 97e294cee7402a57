"""The circuit of one provider resource as a pure state machine: values in, values out.

    closed ──qualifying failures──▶ open ──expired, one caller takes the lease──▶ half_open
    half_open ──probe success──▶ closed
    half_open ──probe failure──▶ open (next backoff)

Only `closed` is eligible for dispatch. Hints before backoff: a circuit opened by a
failure with a trusted reset stays open until that reset (plus a small deterministic
jitter, circuits.settings); one opened without a hint stays open for the first backoff.
A probe failure reopens it for the next (growing) backoff, or until its own trusted
reset when that is later. While open, a newer trusted reset moves open-until later,
never earlier; nothing is open beyond `max_open_s`. After that exactly one caller
gets the probe lease; its owner token fences its result, so a stale prober's late report
is ignored, and an expired lease lets exactly one new caller take over.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from circuits.marks import (
    FailureMark,
    Marks,
    directly_qualify,
    latest_reset,
    models_qualify,
    retained,
)
from circuits.qualify import FailureLike, Severity, severity, trusted_reset
from circuits.release import hashed_jitter
from circuits.settings import CircuitSettings, UtcDatetime, to_utc

_FROZEN: Final = ConfigDict(frozen=True, extra="forbid")


class CircuitStatus(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


_C, _O, _H = CircuitStatus.CLOSED, CircuitStatus.OPEN, CircuitStatus.HALF_OPEN

ALLOWED_EDGES: Final = frozenset(
    {(_C, _C), (_C, _O), (_O, _O), (_O, _H), (_H, _H), (_H, _C), (_H, _O)}
)


class ProbeLease(BaseModel):
    model_config = _FROZEN

    holder: str = Field(min_length=1)
    owner_token: str
    acquired_at: UtcDatetime
    expires_at: UtcDatetime


class CircuitState(BaseModel):
    """Storable (JSON) state of one circuit. `lease_epoch` only ever grows: it numbers the
    leases handed out, so an owner token is never reused. `failed_probes` counts failed
    probes since the circuit last closed and selects the backoff."""

    model_config = _FROZEN

    status: CircuitStatus = CircuitStatus.CLOSED
    recent_failures: tuple[FailureMark, ...] = ()
    opened_at: UtcDatetime | None = None
    open_until: UtcDatetime | None = None
    reason: str | None = None
    failed_probes: int = Field(default=0, ge=0)
    lease: ProbeLease | None = None
    lease_epoch: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.status is CircuitStatus.CLOSED:
            if self.open_until is not None or self.opened_at is not None or self.lease:
                raise ValueError("a closed circuit has no open_until, opened_at or lease")
            if self.failed_probes:
                raise ValueError(f"a closed circuit has failed_probes {self.failed_probes}")
            return self
        if self.open_until is None or self.opened_at is None:
            raise ValueError(f"a {self.status} circuit needs open_until and opened_at")
        if self.recent_failures:
            raise ValueError(f"a {self.status} circuit counts no recent failures")
        if (self.status is CircuitStatus.HALF_OPEN) != (self.lease is not None):
            raise ValueError(f"a {self.status} circuit has lease {self.lease!r}")
        return self


class ProbeGrant(BaseModel):
    """The caller holds the probe lease: it alone may dispatch, then report with the token."""

    model_config = _FROZEN

    kind: Literal["granted"] = "granted"
    holder: str
    owner_token: str
    expires_at: UtcDatetime


class DenialReason(StrEnum):
    CLOSED = "closed"
    COOLING_DOWN = "cooling_down"
    HELD = "held"


class ProbeDenied(BaseModel):
    """No lease. `retry_at` is when asking again can succeed (None when closed: dispatch)."""

    model_config = _FROZEN

    kind: Literal["denied"] = "denied"
    reason: DenialReason
    retry_at: UtcDatetime | None = None
    holder: str | None = None


def is_eligible(state: CircuitState, now: datetime) -> bool:
    """True when routes may dispatch into the resource. An open circuit whose backoff has
    expired is still not eligible: only the probe lease holder dispatches."""
    to_utc(now)
    return state.status is CircuitStatus.CLOSED


def next_change_at(state: CircuitState) -> datetime | None:
    """When the circuit can next change without a report: backoff or lease expiry."""
    if state.status is CircuitStatus.OPEN:
        return state.open_until
    if state.lease is not None:
        return state.lease.expires_at
    return None


def record_failure(
    state: CircuitState,
    failure: FailureLike,
    route_id: str,
    now: datetime,
    settings: CircuitSettings,
    *,
    seed: str = "",
    model: str | None = None,
    min_models: int = 1,
) -> CircuitState:
    """Count a failure seen by `route_id` (on `model`) on this resource. `seed` makes the
    reset jitter (use the resource id). With `min_models` > 1 (a provider-wide circuit
    fed by its models' failures) it opens only once failures of at least that many
    distinct models are in the window, each enough to open its own model's circuit (a
    hard one, or the transient threshold counted over the window)."""
    now = to_utc(now)
    kind = severity(failure, now)
    if kind is Severity.IGNORED:
        return state
    reset = trusted_reset(failure, now)
    if state.status is CircuitStatus.OPEN:
        return _extend_to_reset(state, reset, now, settings, seed)
    if state.status is CircuitStatus.HALF_OPEN:
        return state  # the probe decides
    opens = kind is Severity.OPENS
    if opens and min_models <= 1:
        return _open(state, failure.code, now, reset, settings, seed)
    mark = FailureMark(
        at=now, route_id=route_id, code=failure.code, reset_at=reset, model=model, opens=opens,
        min_models=min_models,
    )  # fmt: skip
    if _seen(mark, state.recent_failures):
        return state  # the same report delivered again (a retried delivery) counts once
    return _count_transient(state, mark, settings, seed, min_models)


def _seen(mark: FailureMark, marks: Marks) -> bool:
    """`mark in marks`, comparing the route and moment first: a model's equality compares
    every field, ~1 µs a mark, and a busy circuit's marks are nearly all other routes'."""
    return any(m.route_id == mark.route_id and m.at == mark.at and m == mark for m in marks)


def acquire_probe(
    state: CircuitState, caller: str, now: datetime, lease_ttl: timedelta
) -> tuple[CircuitState, ProbeGrant | ProbeDenied]:
    """Give the probe lease to `caller` if the backoff has expired and nobody holds a live
    lease. The current holder asking again gets its own lease back (not extended)."""
    now = to_utc(now)
    if not caller:
        raise ValueError("caller must not be empty")
    if lease_ttl <= timedelta(0):
        raise ValueError(f"lease_ttl {lease_ttl} must be positive")
    if state.status is CircuitStatus.CLOSED:
        return state, ProbeDenied(reason=DenialReason.CLOSED)
    lease = state.lease
    if lease is not None and now < lease.expires_at:
        if lease.holder == caller:
            return state, _grant(lease)
        return state, ProbeDenied(
            reason=DenialReason.HELD, retry_at=lease.expires_at, holder=lease.holder
        )
    assert state.open_until is not None  # guaranteed by CircuitState's validator
    if lease is None and now < state.open_until:
        return state, ProbeDenied(reason=DenialReason.COOLING_DOWN, retry_at=state.open_until)
    epoch = state.lease_epoch + 1
    new_lease = ProbeLease(
        holder=caller,
        owner_token=f"{epoch}:{caller}",
        acquired_at=now,
        expires_at=now + lease_ttl,
    )
    updated = state.model_copy(
        update={"status": CircuitStatus.HALF_OPEN, "lease": new_lease, "lease_epoch": epoch}
    )
    return updated, _grant(new_lease)


def holds_probe(state: CircuitState, owner_token: str, now: datetime) -> bool:
    """True when `owner_token` names the live lease."""
    lease = state.lease
    return lease is not None and lease.owner_token == owner_token and to_utc(now) < lease.expires_at


def record_probe_result(
    state: CircuitState,
    owner_token: str,
    success: bool,
    now: datetime,
    settings: CircuitSettings,
    *,
    reset_at: datetime | None = None,
    seed: str = "",
) -> CircuitState:
    """Close on success; reopen with the next backoff on failure (until the probe
    failure's trusted `reset_at` instead when that is later). A result from anyone but
    the live lease's owner is ignored: the state comes back unchanged."""
    now = to_utc(now)
    if not holds_probe(state, owner_token, now):
        return state
    if success:
        return CircuitState(lease_epoch=state.lease_epoch)
    reset = to_utc(reset_at) if reset_at is not None and to_utc(reset_at) > now else None
    failed = state.failed_probes + 1
    return state.model_copy(
        update={
            "status": CircuitStatus.OPEN,
            "lease": None,
            "failed_probes": failed,
            "open_until": _open_until(now, settings.backoff_s(failed), reset, settings, seed),
        }
    )


def abandon_probe(state: CircuitState, owner_token: str, now: datetime) -> CircuitState:
    """The holder will not probe after all: reopen, expired, so the next caller may."""
    now = to_utc(now)
    if not holds_probe(state, owner_token, now):
        return state
    return state.model_copy(update={"status": CircuitStatus.OPEN, "lease": None, "open_until": now})


def _grant(lease: ProbeLease) -> ProbeGrant:
    return ProbeGrant(
        holder=lease.holder, owner_token=lease.owner_token, expires_at=lease.expires_at
    )


def jittered_reset(
    reset: datetime, now: datetime, settings: CircuitSettings, seed: str = ""
) -> datetime:
    """A trusted reset plus its deterministic jitter (the same for the same seed and
    reset on every host), capped at `max_open_s` from now."""
    span = settings.reset_jitter_span_s((reset - now).total_seconds())
    until = reset + timedelta(seconds=span * hashed_jitter(seed, reset.isoformat()))
    return min(until, now + timedelta(seconds=settings.max_open_s))


def _open_until(
    now: datetime,
    backoff_s: float,
    reset: datetime | None,
    settings: CircuitSettings,
    seed: str,
) -> datetime:
    until = now + timedelta(seconds=backoff_s)
    if reset is not None and reset > until:
        until = jittered_reset(reset, now, settings, seed)
    return min(until, now + timedelta(seconds=settings.max_open_s))


def _open(  # noqa: PLR0917 - one change, spelled out
    state: CircuitState,
    code: str,
    now: datetime,
    reset: datetime | None,
    settings: CircuitSettings,
    seed: str,
) -> CircuitState:
    """Open: until the trusted reset when there is one (hints before backoff), else for
    the first backoff."""
    if reset is not None:
        until = jittered_reset(reset, now, settings, seed)
    else:
        until = _open_until(now, settings.backoff_s(0), None, settings, seed)
    return state.model_copy(
        update={
            "status": CircuitStatus.OPEN,
            "recent_failures": (),
            "opened_at": now,
            "open_until": until,
            "reason": code,
            "failed_probes": 0,
        }
    )


def _extend_to_reset(
    state: CircuitState,
    reset: datetime | None,
    now: datetime,
    settings: CircuitSettings,
    seed: str,
) -> CircuitState:
    assert state.open_until is not None  # guaranteed by CircuitState's validator
    if reset is None or reset <= state.open_until:
        return state
    capped = jittered_reset(reset, now, settings, seed)
    if capped <= state.open_until:
        return state
    return state.model_copy(update={"open_until": capped})


def _count_transient(
    state: CircuitState,
    mark: FailureMark,
    settings: CircuitSettings,
    seed: str,
    min_models: int,
) -> CircuitState:
    now = mark.at
    horizon = now - timedelta(seconds=settings.transient_window_s)
    kept = (m for m in state.recent_failures if m.at > horizon)
    recent = retained((*kept, mark), settings)
    if (
        directly_qualify(recent, settings)
        if min_models <= 1
        else models_qualify(recent, settings, min_models)
    ):
        return _open(state, mark.code, now, latest_reset(recent, now), settings, seed)
    return state.model_copy(update={"recent_failures": recent})


def probe_due(state: CircuitState, now: datetime) -> bool:
    """Whether the circuit would hand out its probe lease now (open past open-until, or a
    lease that has expired)."""
    if state.status is CircuitStatus.CLOSED:
        return False
    if state.lease is not None:
        return state.lease.expires_at <= now
    return state.open_until is not None and state.open_until <= now
