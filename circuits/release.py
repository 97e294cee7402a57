"""Controlled release: when a circuit closes, its parked routes go back in budgeted waves.

Each wave holds at most B = max(1, floor(wave_fraction x parked)) routes. Routes are
released one slot apart, a slot being (1 + headroom) x wave_interval / B, so a wave
lasts (1 + headroom) intervals and the next starts where it ends: evenly spaced, so that
with no jitter (the default) any window of one interval, aligned or not, open or closed,
holds at most B releases, with `headroom` (10 %) left for the lateness of timers and
queues between a slot and the dispatch it starts (the budget is held per observed
second, not only per planned wave). A jitter moves a route within its own slot only.
Parked order is kept: the
first parked is in the first wave, first in it. The draw comes from a seed (hashed with
the route id, reproducible on every host) or from an injected `uniform()` callable such as
`random.Random(seed).random`; this module itself reads no randomness.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from circuits.settings import to_utc


class ReleaseSlot(NamedTuple):
    route_id: str
    release_at: datetime


@dataclass(frozen=True, slots=True)
class ReleasePlan:
    """`waves[k]` are the slots of wave k, each sorted by release time."""

    budget: int
    waves: tuple[tuple[ReleaseSlot, ...], ...]

    @property
    def slots(self) -> tuple[ReleaseSlot, ...]:
        return tuple(slot for wave in self.waves for slot in wave)

    def __len__(self) -> int:
        return sum(len(wave) for wave in self.waves)


def wave_budget(parked: int, wave_fraction: float = 0.2) -> int:
    """At most this many routes per wave: max(1, floor(wave_fraction x parked))."""
    if parked < 0:
        raise ValueError(f"parked count {parked} must not be negative")
    if not 0 < wave_fraction <= 1:
        raise ValueError(f"wave_fraction {wave_fraction} must be in (0, 1]")
    return max(1, math.floor(parked * wave_fraction + 1e-9))


def hashed_jitter(seed: int | str, route_id: str) -> float:
    """A deterministic value in [0, 1) for `route_id` under `seed`."""
    digest = hashlib.sha256(f"{seed}\x00{route_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def plan_release(
    route_ids: Iterable[str],
    start: datetime,
    *,
    seed: int | str = 0,
    uniform: Callable[[], float] | None = None,
    wave_fraction: float = 0.2,
    wave_interval: timedelta = timedelta(seconds=1),
    jitter_fraction: float = 0.0,
    headroom: float = 0.1,
) -> ReleasePlan:
    """Release `route_ids` (parked order; duplicates released once) from `start` on."""
    start = to_utc(start)
    if wave_interval <= timedelta(0):
        raise ValueError(f"wave_interval {wave_interval} must be positive")
    if not 0 <= jitter_fraction < 1:
        raise ValueError(f"jitter_fraction {jitter_fraction} must be in [0, 1)")
    if not 0 <= headroom <= 1:
        raise ValueError(f"headroom {headroom} must be in [0, 1]")
    unique = tuple(dict.fromkeys(route_ids))
    budget = wave_budget(len(unique), wave_fraction)
    waves: list[tuple[ReleaseSlot, ...]] = []
    slot_s = wave_interval.total_seconds() * (1 + headroom) / budget
    for index in range(0, len(unique), budget):
        slots = [
            ReleaseSlot(
                route_id,
                start
                + timedelta(
                    seconds=slot_s
                    * (index + position + jitter_fraction * _draw(uniform, seed, route_id))
                ),
            )
            for position, route_id in enumerate(unique[index : index + budget])
        ]
        waves.append(tuple(sorted(slots, key=lambda slot: (slot.release_at, slot.route_id))))
    return ReleasePlan(budget=budget, waves=tuple(waves))


def _draw(uniform: Callable[[], float] | None, seed: int | str, route_id: str) -> float:
    if uniform is None:
        return hashed_jitter(seed, route_id)
    value = uniform()
    if not 0 <= value < 1:
        raise ValueError(f"uniform() returned {value}, outside [0, 1)")
    return value
