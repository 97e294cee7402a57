"""What the circuit store hands back, and the checks on what it is given.

A `CircuitView` is one circuit as stored: its resource, its pure `CircuitState`, the
compare-and-set version and how many routes are parked on it. Inputs are checked before
anything touches Redis, and a bad one raises InvalidCircuitInputError naming the argument
and its value (never a pydantic ValidationError or a bare ValueError from the core).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from actors.errors import InvalidCircuitInputError
from circuits import (
    CircuitState,
    CircuitStatus,
    FailureLike,
    ReleasePlan,
    ResourceKey,
    is_eligible,
)
from circuits.settings import UtcDatetime

HOLDER_PATTERN: Final = r"[A-Za-z0-9._:-]{1,160}"
MAX_TOKEN_CHARS: Final = 256
MAX_HINT_S: Final = 1e9  # about 31 years
_HOLDER = re.compile(HOLDER_PATTERN)


class CircuitView(BaseModel):
    """One circuit as stored. A circuit never written is closed at version 0."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource: ResourceKey
    state: CircuitState = CircuitState()
    version: int = Field(default=0, ge=0)
    parked: int = Field(default=0, ge=0)
    updated_at: UtcDatetime | None = None

    @property
    def resource_id(self) -> str:
        return self.resource.resource_id

    @property
    def status(self) -> CircuitStatus:
        return self.state.status

    @property
    def open_until(self) -> datetime | None:
        return self.state.open_until

    @property
    def probe_holder(self) -> str | None:
        return None if self.state.lease is None else self.state.lease.holder

    def eligible(self, now: datetime) -> bool:
        """Routes may dispatch into the resource (only when closed)."""
        return is_eligible(self.state, aware("now", now))


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """What a probe report did. `accepted` is False when the reporter no longer holds the
    live lease (a stale or expired prober): nothing changed. `release` is the plan for the
    routes parked when the circuit closed (None unless this report closed it)."""

    accepted: bool
    view: CircuitView
    release: ReleasePlan | None = None


@dataclass(frozen=True, slots=True)
class OpenCircuit:
    """An operator's override: the circuit open until `until` (aware), whatever opened it."""

    until: datetime


@dataclass(frozen=True, slots=True)
class CloseCircuit:
    """An operator's override: the circuit closed, its parked routes released."""


CircuitOverride = OpenCircuit | CloseCircuit


@dataclass(frozen=True, slots=True)
class OverrideOutcome:
    """What an override did: the circuit after it; `changed` False when it was already
    so (nothing written, no event); the id of the event it recorded on the circuit events
    stream; the release plan of the routes parked when a close took effect (None else)."""

    view: CircuitView
    changed: bool
    event_id: str | None = None
    release: ReleasePlan | None = None


@dataclass(frozen=True, slots=True)
class ParkOutcome:
    """`parked` is False when the circuit was closed: the route may dispatch instead."""

    parked: bool
    status: CircuitStatus
    version: int
    parked_count: int


@dataclass(frozen=True, slots=True)
class ReleaseSettings:
    """Release waves (circuits.release.plan_release): at most max(1, `wave_fraction` x
    parked) routes per wave, one wave per `wave_interval`, evenly spaced inside it
    (a `jitter_fraction` > 0 moves each within its own slot)."""

    wave_fraction: float = 0.2
    wave_interval: timedelta = timedelta(seconds=1)
    jitter_fraction: float = 0.0
    headroom: float = 0.1


def aware(field: str, moment: object) -> datetime:
    """`moment` in UTC, or InvalidCircuitInputError when it is not an aware datetime."""
    if not isinstance(moment, datetime) or moment.utcoffset() is None:
        raise InvalidCircuitInputError(field, moment, "must be a timezone-aware datetime")
    return moment.astimezone(UTC)


def valid_holder(holder: object) -> str:
    if not isinstance(holder, str) or not _HOLDER.fullmatch(holder):
        raise InvalidCircuitInputError("holder", holder, f"must match {HOLDER_PATTERN}")
    return holder


def valid_token(token: object) -> str:
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
        raise InvalidCircuitInputError(
            "owner token", token, f"must be a non-empty string of <= {MAX_TOKEN_CHARS} chars"
        )
    return token


def valid_ttl(ttl_s: object) -> timedelta:
    if (
        not isinstance(ttl_s, int | float)
        or isinstance(ttl_s, bool)
        or not math.isfinite(ttl_s)
        or ttl_s <= 0
    ):
        raise InvalidCircuitInputError("ttl_s", ttl_s, "must be a finite number of seconds > 0")
    return timedelta(seconds=ttl_s)


def valid_resource(resource: object) -> ResourceKey:
    if not isinstance(resource, ResourceKey):
        raise InvalidCircuitInputError("resource", resource, "must be a circuits.ResourceKey")
    return resource


def valid_failure(failure: FailureLike) -> FailureLike:
    """The failure's own times must be aware too (the core would raise a bare ValueError)."""
    if failure.reset_at is not None:
        aware("failure.reset_at", failure.reset_at)
    hint = failure.retry_after_s
    if hint is not None and not (math.isfinite(hint) and abs(hint) <= MAX_HINT_S):
        # the machine caps open periods at 7 days, but now + an absurd hint would not
        # even be a datetime (OverflowError) before the cap applies
        raise InvalidCircuitInputError(
            "failure.retry_after_s", hint, f"must be finite and within {MAX_HINT_S:.0e} s"
        )
    return failure


def resource_key(
    provider: str, model: str | None = None, credential_fingerprint: str | None = None
) -> ResourceKey:
    """A ResourceKey from its parts; a bad part raises InvalidCircuitInputError naming it."""
    parts = {
        "provider": provider,
        "model": model,
        "credential_fingerprint": credential_fingerprint,
    }
    try:
        return ResourceKey.model_validate(parts)
    except ValidationError as error:
        first = error.errors()[0]
        part = ".".join(str(name) for name in first["loc"])
        field, value = (f"resource {part}", parts[part]) if part in parts else ("resource", parts)
        raise InvalidCircuitInputError(field, value, first["msg"].lower()) from None
