"""The figures of bench/stampede.py, computed from send intervals (wall-clock seconds)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from bench_common import ms, percentile

PROBE_REASON: Final = "circuit_probe"


@dataclass(frozen=True, slots=True)
class Interval:
    """One send: when it started and ended (epoch seconds)."""

    started: float
    ended: float


@dataclass(frozen=True, slots=True)
class Sent:
    """One dispatch as the bench dispatcher recorded it."""

    route_id: str
    generation: int
    reason: str
    worker: str
    enqueued: float | None
    interval: Interval

    @property
    def probe(self) -> bool:
        return self.reason.startswith(PROBE_REASON)

    @property
    def queue_wait_s(self) -> float | None:
        """From rq's enqueue of the job to the send's start (worker pool saturation)."""
        return None if self.enqueued is None else self.interval.started - self.enqueued

    @classmethod
    def from_json(cls, text: str | bytes) -> Sent:
        raw: dict[str, Any] = json.loads(text)
        interval = Interval(float(raw["started"]), float(raw["ended"]))
        enqueued = raw.get("enqueued")
        return cls(
            str(raw["route_id"]), int(raw["generation"]), str(raw["reason"]),
            str(raw["worker"]), None if enqueued is None else float(enqueued), interval,
        )  # fmt: skip


def max_in_flight(intervals: Sequence[Interval]) -> int:
    """The most sends running at once (a send ending at t is no longer running at t)."""
    events = [(i.started, 1) for i in intervals] + [(i.ended, -1) for i in intervals]
    running = most = 0
    for _, change in sorted(events):  # at equal times -1 sorts before +1
        running += change
        most = max(most, running)
    return most


def per_second(intervals: Sequence[Interval], origin: float) -> list[int]:
    """Sends started in each whole second after `origin` ([origin + k, origin + k + 1));
    sends started before `origin` are left out."""
    seconds = [math.floor(i.started - origin) for i in intervals if i.started >= origin]
    if not seconds:
        return []
    counts = [0] * (max(seconds) + 1)
    for second in seconds:
        counts[second] += 1
    return counts


def max_per_window(intervals: Sequence[Interval], origin: float, window_s: float = 1.0) -> int:
    """The most sends started in any window of `window_s` (closed, at any offset, not only
    whole seconds) at or after `origin`."""
    starts = sorted(i.started for i in intervals if i.started >= origin)
    most = first = 0
    for last, moment in enumerate(starts):
        while moment - starts[first] > window_s:
            first += 1
        most = max(most, last - first + 1)
    return most


def started_within(intervals: Sequence[Interval], begin: float, end: float) -> int:
    return sum(1 for i in intervals if begin <= i.started < end)


def spread_ms(values: Sequence[float], prefix: str) -> dict[str, float]:
    if not values:
        return {}
    return {
        f"{prefix}_p50_ms": ms(percentile(values, 0.50)),
        f"{prefix}_p99_ms": ms(percentile(values, 0.99)),
        f"{prefix}_max_ms": ms(max(values)),
    }
