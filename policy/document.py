"""Policy documents: one candidate's v1 class policies and the dynamic profile holding them.

These models are the stored, normalised form. Input from outside goes through
`policy.validation` (every error at once, addressed by field) or `policy.legacy`; the
models themselves still refuse anything out of bounds when built directly in Python.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from catalogue.codes import ErrorClass

POLICY_VERSION: Final = 1
MAX_RETRIES: Final = 10
MAX_INITIAL_INTERVAL_SECONDS: Final = 3600
MAX_WAIT_SECONDS: Final = 7 * 24 * 3600
MAX_CANDIDATE_ID_CHARS: Final = 128
MAX_CANDIDATES: Final = 32  # a profile is a fallback order, not a catalogue
ACCOUNT_LABEL_PATTERN: Final = r"^[A-Za-z0-9._:@/+-]{1,128}$"
"""A candidate's credential binding label: an account or key name the orchestrator
chooses (never the secret itself); its circuits are keyed by an HMAC of it."""

# The two classes a policy configures; `none` and `unclassified` always stop.
POLICY_CLASSES: Final = (ErrorClass.TRANSIENT, ErrorClass.HARD)


class Outcome(StrEnum):
    """What happens when retrying and reset waiting are used up or do not apply."""

    SKIP = "skip"
    STOP = "stop"


_FROZEN = ConfigDict(frozen=True, extra="forbid")


def _enabled_branch(bounds: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """JSON Schema: the bounds apply when the section is enabled; otherwise numbers are
    ignored and stored as zero."""
    return {
        "if": {"properties": {"enabled": {"const": True}}},
        "then": {
            "required": sorted(bounds),
            "properties": {
                name: {"minimum": low, "maximum": high} for name, (low, high) in bounds.items()
            },
        },
    }


def _zero_numbers_when_disabled(data: Any, names: tuple[str, ...]) -> Any:
    """A disabled section stores zeros; what it was given must still be a whole number
    >= 0, as parse_document requires, so both accept exactly the same documents."""
    if isinstance(data, dict) and data.get("enabled") is False:
        for name in names:
            value = data.get(name, 0)
            whole = isinstance(value, int | float) and not isinstance(value, bool)
            if not whole or not math.isfinite(value) or value < 0 or value != int(value):
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        return {**data, **dict.fromkeys(names, 0)}
    return data


def _exact_version(value: Any) -> Any:
    # Literal[1] alone would take True and 1.0 (they compare equal to 1).
    if type(value) is not int:
        raise ValueError(f"unsupported version {value!r}; expected {POLICY_VERSION}")
    return value


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, got {value}")


class RetryPolicy(BaseModel):
    """Same-candidate retries: delay = initial * 2**ordinal, capped at 24 h."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra=_enabled_branch(
            {
                "max_retries": (1, MAX_RETRIES),
                "initial_interval_seconds": (1, MAX_INITIAL_INTERVAL_SECONDS),
            }
        ),
    )

    enabled: bool = Field(strict=True)
    max_retries: int = Field(default=0, ge=0, strict=True)
    initial_interval_seconds: int = Field(default=0, ge=0, strict=True)

    @classmethod
    def disabled(cls) -> Self:
        return cls(enabled=False)

    @model_validator(mode="before")
    @classmethod
    def _zero_when_disabled(cls, data: Any) -> Any:
        return _zero_numbers_when_disabled(data, ("max_retries", "initial_interval_seconds"))

    @model_validator(mode="after")
    def _bounded_when_enabled(self) -> Self:
        if self.enabled:
            _check_range("max_retries", self.max_retries, 1, MAX_RETRIES)
            _check_range(
                "initial_interval_seconds",
                self.initial_interval_seconds,
                1,
                MAX_INITIAL_INTERVAL_SECONDS,
            )
        return self


class WaitForResetPolicy(BaseModel):
    """Waiting once per cycle for a trusted reset no further away than `max_wait_seconds`."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra=_enabled_branch({"max_wait_seconds": (1, MAX_WAIT_SECONDS)}),
    )

    enabled: bool = Field(strict=True)
    max_wait_seconds: int = Field(default=0, ge=0, strict=True)

    @classmethod
    def disabled(cls) -> Self:
        return cls(enabled=False)

    @model_validator(mode="before")
    @classmethod
    def _zero_when_disabled(cls, data: Any) -> Any:
        return _zero_numbers_when_disabled(data, ("max_wait_seconds",))

    @model_validator(mode="after")
    def _bounded_when_enabled(self) -> Self:
        if self.enabled:
            _check_range("max_wait_seconds", self.max_wait_seconds, 1, MAX_WAIT_SECONDS)
        return self


class ClassPolicy(BaseModel):
    """How one candidate answers one class of failure."""

    model_config = _FROZEN

    retry: RetryPolicy
    wait_for_reset: WaitForResetPolicy
    on_exhausted: Outcome

    @classmethod
    def immediately(cls, outcome: Outcome) -> Self:
        """No wait, no retry: apply `outcome` at once."""
        return cls(
            retry=RetryPolicy.disabled(),
            wait_for_reset=WaitForResetPolicy.disabled(),
            on_exhausted=outcome,
        )

    @property
    def is_immediate(self) -> bool:
        return not self.retry.enabled and not self.wait_for_reset.enabled


class PolicyDocument(BaseModel):
    """One candidate's versioned policy: complete `transient` and `hard` sections."""

    model_config = _FROZEN

    version: Literal[1]
    transient: ClassPolicy
    hard: ClassPolicy

    _version_is_an_integer = field_validator("version", mode="before")(_exact_version)

    @classmethod
    def default(cls) -> Self:
        """New and legacy candidates: retry and reset waiting off, skip for both classes."""
        skip = ClassPolicy.immediately(Outcome.SKIP)
        return cls(version=POLICY_VERSION, transient=skip, hard=skip)

    def for_class(self, error_class: ErrorClass) -> ClassPolicy:
        """The section for a configurable class; `none` and `unclassified` have none."""
        if error_class is ErrorClass.TRANSIENT:
            return self.transient
        if error_class is ErrorClass.HARD:
            return self.hard
        raise ValueError(f"class {error_class.value!r} has no policy; it always stops")


class Candidate(BaseModel):
    """One entry of a dynamic profile, tried in order. Its class policies sit on it
    directly (`candidates[2].hard.retry.max_retries`)."""

    model_config = _FROZEN

    id: str = Field(min_length=1, max_length=MAX_CANDIDATE_ID_CHARS)
    agent: str = Field(min_length=1)
    provider: str | None = Field(default=None, min_length=1)  # as parse_profile: "" is refused
    model: str | None = Field(default=None, min_length=1)
    account: str | None = Field(default=None, pattern=ACCOUNT_LABEL_PATTERN)
    enabled: bool = Field(default=True, strict=True)
    transient: ClassPolicy
    hard: ClassPolicy

    @property
    def policy(self) -> PolicyDocument:
        return PolicyDocument(version=POLICY_VERSION, transient=self.transient, hard=self.hard)

    @property
    def label(self) -> str:
        target = "/".join(part for part in (self.provider, self.model) if part)
        return f"{self.id} ({self.agent}{', ' + target if target else ''})"


class DynamicProfile(BaseModel):
    """An ordered list of candidates, each with its own v1 class policies."""

    model_config = _FROZEN

    version: Literal[1] = POLICY_VERSION
    name: str | None = None
    candidates: tuple[Candidate, ...] = Field(min_length=1, max_length=MAX_CANDIDATES)

    _version_is_an_integer = field_validator("version", mode="before")(_exact_version)

    @model_validator(mode="after")
    def _unique_candidate_ids(self) -> Self:
        seen: set[str] = set()
        for candidate in self.candidates:
            if candidate.id in seen:
                raise ValueError(f"candidate id {candidate.id!r} is used twice")
            seen.add(candidate.id)
        return self
