"""Circuit thresholds and timings, with the defaults of docs/DESIGN.md §3."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Self

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

SECONDS_PER_DAY = 86_400


def to_utc(moment: datetime) -> datetime:
    """`moment` in UTC; a naive datetime is an error (the core never guesses a zone)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"datetime {moment.isoformat()} must be timezone-aware")
    return moment.astimezone(UTC)


UtcDatetime = Annotated[AwareDatetime, AfterValidator(to_utc)]


class CircuitSettings(BaseModel):
    """Transient failures open a circuit after `transient_threshold` of them within
    `transient_window_s` from at least `min_distinct_routes` routes. Backoff starts at
    `initial_backoff_s`, doubles on each failed probe and is capped at `max_backoff_s`; a
    circuit is never open for longer than `max_open_s` (30 days: the catalogue drops
    hints beyond that), whatever reset a provider claims. A circuit opened by a failure
    with a trusted reset is open until that reset plus a deterministic jitter of at most
    min(`reset_jitter_s`, `reset_jitter_fraction` x the wait), so circuits sharing one
    reset do not all expire in the same instant."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    transient_threshold: int = Field(default=3, ge=1, le=1000)
    transient_window_s: float = Field(default=60.0, gt=0, le=SECONDS_PER_DAY, allow_inf_nan=False)
    min_distinct_routes: int = Field(default=2, ge=1, le=1000)
    initial_backoff_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    max_backoff_s: float = Field(default=3600.0, gt=0, allow_inf_nan=False)
    max_open_s: float = Field(default=30 * SECONDS_PER_DAY, gt=0, allow_inf_nan=False)
    reset_jitter_s: float = Field(default=1.0, ge=0, le=3600, allow_inf_nan=False)
    reset_jitter_fraction: float = Field(default=0.1, ge=0, le=1, allow_inf_nan=False)
    max_recent_failures: int = Field(default=256, ge=1, le=100_000)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError(
                f"max_backoff_s {self.max_backoff_s} is below initial_backoff_s "
                f"{self.initial_backoff_s}"
            )
        if self.max_open_s < self.max_backoff_s:
            raise ValueError(
                f"max_open_s {self.max_open_s} is below max_backoff_s {self.max_backoff_s}"
            )
        if self.max_recent_failures < self.transient_threshold:
            raise ValueError(
                f"max_recent_failures {self.max_recent_failures} is below "
                f"transient_threshold {self.transient_threshold}"
            )
        return self

    def backoff_s(self, failed_probes: int) -> float:
        """The open period after `failed_probes` consecutive failed probes (0: first open)."""
        doublings = min(failed_probes, 64)
        return float(min(self.initial_backoff_s * 2.0**doublings, self.max_backoff_s))

    def reset_jitter_span_s(self, wait_s: float) -> float:
        """The most jitter added to a trusted reset that is `wait_s` away."""
        return max(0.0, min(self.reset_jitter_s, self.reset_jitter_fraction * wait_s))
