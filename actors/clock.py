"""Clocks: the one seam through which the shell reads the time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, aware, in UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told (tests, simulations)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError(f"a manual clock needs an aware start time, got {start!r}")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, by: timedelta) -> datetime:
        self._now += by
        return self._now

    def set(self, moment: datetime) -> None:
        self._now = moment.astimezone(UTC)
