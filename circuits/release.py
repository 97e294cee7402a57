"""Controlled release: when a circuit closes, its parked routes go back in budgeted waves.

Each wave holds at most max(1, floor(wave_fraction x parked)) routes, waves start one
`wave_interval` apart, and routes are spread inside their wave by a deterministic jitter,
never beyond `jitter_fraction` of the interval (so waves never overlap). Parked order is
kept: the first parked is in the first wave. The jitter comes from a seed (hashed with the
route id, reproducible on every host) or from an injected `uniform()` callable such as
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
    jitter_fraction: float = 0.5,
) -> ReleasePlan:
    """Release `route_ids` (parked order; duplicates released once) from `start` on."""
    start = to_utc(start)
    if wave_interval <= timedelta(0):
        raise ValueError(f"wave_interval {wave_interval} must be positive")
    if not 0 <= jitter_fraction < 1:
        raise ValueError(f"jitter_fraction {jitter_fraction} must be in [0, 1)")
    unique = tuple(dict.fromkeys(route_ids))
    budget = wave_budget(len(unique), wave_fraction)
    waves: list[tuple[ReleaseSlot, ...]] = []
    for index in range(0, len(unique), budget):
        wave_start = start + wave_interval * (index // budget)
        slots = [
            ReleaseSlot(
                route_id,
                wave_start + wave_interval * (jitter_fraction * _draw(uniform, seed, route_id)),
            )
            for route_id in unique[index : index + budget]
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
