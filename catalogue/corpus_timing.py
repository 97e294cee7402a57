"""Scoring the timing hints the catalogue reads from labelled rows.

A row's `timing` label says what the evidence states about when to try again. It is a
*server hint* when it came from the provider or agent (any `source` but `client_backoff`)
and names an instant or a delay that can be placed in time: a number of seconds, an epoch,
or a wall-clock time with a zone. A client countdown, a date without a time, or a clock
time without a zone is no hint: the catalogue must produce none for it.

- *read*: a server hint the classification reproduces (a delay within 1 % or 1 s, an
  epoch within 1 s, a wall-clock time shown at the same hour and minute in its zone);
- *invented*: a classification that carries a hint where the label has no server hint.

Each row is classified at a reference time of its own, so an epoch from 2025 is still in
the future when it is scored: one hour before the labelled epoch, else the fixed
`REFERENCE_NOW`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Final

from catalogue._durations import epoch_instant, fixed_offset, zone_named
from catalogue.classification import Classification
from catalogue.corpus import evidence_from_row
from catalogue.evidence import Evidence

REFERENCE_NOW: Final = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CLIENT_BACKOFF: Final = "client_backoff"
_CLOCK = re.compile(r"\s*(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ServerHint:
    """What a row's label says the server stated: exactly one field is set."""

    seconds: float | None = None
    epoch: float | None = None
    wall_clock: tuple[int, int, tzinfo] | None = None  # hour, minute, zone


@dataclass
class TimingScore:
    expected: int = 0
    read: int = 0
    missed: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)

    @property
    def read_fraction(self) -> float:
        return self.read / self.expected if self.expected else 1.0


def server_hint(row: Mapping[str, Any]) -> ServerHint | None:
    """The server hint a row's label states, or None (no timing, a client countdown, a
    date or clock time that names no instant)."""
    timing = row.get("timing")
    if not isinstance(timing, Mapping) or timing.get("source") == CLIENT_BACKOFF:
        return None
    if isinstance(seconds := timing.get("seconds"), int | float):
        return ServerHint(seconds=float(seconds))
    if isinstance(epoch := timing.get("epoch"), int | float):
        return ServerHint(epoch=float(epoch))
    absolute, zone_name = timing.get("absolute"), timing.get("timezone")
    if not isinstance(absolute, str) or not isinstance(zone_name, str):
        return None
    clock = _CLOCK.fullmatch(absolute)
    zone = zone_named(zone_name.lower()) or fixed_offset(zone_name.lower())
    if clock is None or zone is None:
        return None
    hour = int(clock.group(1)) % 12 + (12 if clock.group(3).lower() == "p" else 0)
    return ServerHint(wall_clock=(hour, int(clock.group(2) or 0), zone))


def reference_time(row: Mapping[str, Any]) -> datetime:
    hint = server_hint(row)
    if hint is not None and hint.epoch is not None:
        at = epoch_instant(hint.epoch)
        if at is not None:
            return at - timedelta(hours=1)
    return REFERENCE_NOW


def is_read(hint: ServerHint, result: Classification, now: datetime) -> bool:
    if hint.seconds is not None:
        got = _delay_of(result, now)
        return got is not None and abs(got - hint.seconds) <= max(1.0, 0.01 * hint.seconds)
    if hint.epoch is not None:
        at = epoch_instant(hint.epoch)
        return (
            at is not None
            and result.reset_at is not None
            and abs((result.reset_at - at).total_seconds()) <= 1
        )
    if hint.wall_clock is not None and result.reset_at is not None:
        hour, minute, zone = hint.wall_clock
        local = result.reset_at.astimezone(zone)
        return (local.hour, local.minute) == (hour, minute)
    return False


def score_timing(
    rows: Iterable[Mapping[str, Any]],
    classify: Callable[[Evidence, datetime], Classification],
) -> TimingScore:
    score = TimingScore()
    for row in rows:
        now = reference_time(row)
        result = classify(evidence_from_row(row), now)
        hint = server_hint(row)
        has_hint = result.retry_after_s is not None or result.reset_at is not None
        if hint is None:
            if has_hint:
                score.invented.append(row["id"])
            continue
        score.expected += 1
        if is_read(hint, result, now):
            score.read += 1
        else:
            score.missed.append(row["id"])
    return score


def _delay_of(result: Classification, now: datetime) -> float | None:
    if result.retry_after_s is not None:
        return result.retry_after_s
    if result.reset_at is not None:
        return (result.reset_at - now).total_seconds()
    return None
