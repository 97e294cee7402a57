"""Paced release: the owner of a closed circuit releases its parked routes one wave at a
time, each wave planned only once the previous one was absorbed (its routes fired and
handed to the dispatcher), at the pace the runtime was observed to carry.

The budget (circuits.release) stays the upper bound: slots are never closer than the
budget's spacing, (1 + headroom) x wave_interval / B with B = wave_budget(parked at the
close), and a wave holds at most B routes, so any window of one interval holds at most B
releases. Below that bound the pace follows what the machine absorbs:
- a wave absorbed on time (every slot up to `tolerance` ago absorbed) lets the next go a
  step faster (`speedup`, never past the budget);
- a late wave sets the next wave's spacing to the pace it was carried at (from its first
  route absorbed to the observation, over the routes absorbed since).
Routes about GROUP_S apart share one slot (`group_size`), so that their timers fire,
transition and enqueue as one batch; the groups stay within the budget.
The first wave, planned before anything was observed, lasts a quarter of an interval.
The next wave is planned once the last one is absorbed but for the routes the current
pace absorbs while the next is delivered (`absorbed_enough`), so on time the waves
follow one another with no gap. A wave lasts about one wave interval at the current
spacing, so the pace is looked at about once an interval. Pure: `now` and every
observation come in as arguments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from circuits.release import ReleaseSlot, hashed_jitter, wave_budget
from circuits.settings import to_utc

DEFAULT_SPEEDUP = 0.9
DEFAULT_TOLERANCE = timedelta(milliseconds=100)
DEFAULT_MAX_SLOT = timedelta(seconds=1)
FIRST_WAVE_SHARE = 0.25
GROUP_S = 0.05  # routes whose slots fall this close together share one slot


@dataclass(frozen=True, slots=True)
class ReleasePace:
    """How a paced release spaces its slots: `slot_s` now, never below `budget_slot_s`
    (the budget's spacing) nor above `max_slot_s`; waves of at most `budget` routes
    lasting about `wave_s`; the budget's `headroom` bounds how many share a slot."""

    budget: int
    budget_slot_s: float
    slot_s: float
    wave_s: float
    max_slot_s: float
    headroom: float = 0.0
    interval_s: float = 0.0  # a wave's length once the pace was observed (0: `wave_s`)

    @property
    def wave_size(self) -> int:
        """Routes in the next wave: one wave interval at the current spacing, at most B."""
        return max(1, min(self.budget, math.floor(self.wave_s / self.slot_s + 1e-9)))

    @property
    def group_size(self) -> int:
        """Routes given one slot together, `group_size` slots apart: about GROUP_S of
        slots, so that their timers fire as one batch (a route's own timer, transition
        and enqueue cost more one by one). At most the headroom's share of the budget,
        so that any window of one interval still holds at most B releases."""
        spare = math.floor(self.budget * (1 - 1 / (1 + self.headroom)) + 1e-9)
        return max(1, min(spare, round(GROUP_S / self.slot_s)))


def first_pace(
    parked: int,
    *,
    wave_fraction: float = 0.2,
    wave_interval: timedelta = timedelta(seconds=1),
    headroom: float = 0.1,
    max_slot: timedelta = DEFAULT_MAX_SLOT,
) -> ReleasePace:
    """The pace of a release of `parked` routes before anything was observed: the
    budget's, for a first wave `FIRST_WAVE_SHARE` of an interval long (a machine slower
    than the budget is then found before many slots were given)."""
    if wave_interval <= timedelta(0):
        raise ValueError(f"wave_interval {wave_interval} must be positive")
    if not 0 <= headroom <= 1:
        raise ValueError(f"headroom {headroom} must be in [0, 1]")
    budget = wave_budget(parked, wave_fraction)
    interval_s = wave_interval.total_seconds() * (1 + headroom)
    budget_slot_s = interval_s / budget
    return ReleasePace(
        budget=budget, budget_slot_s=budget_slot_s, slot_s=budget_slot_s,
        wave_s=interval_s * FIRST_WAVE_SHARE, interval_s=interval_s,
        max_slot_s=max(budget_slot_s, max_slot.total_seconds()), headroom=headroom,
    )  # fmt: skip


def plan_wave(
    route_ids: Sequence[str],
    start: datetime,
    pace: ReleasePace,
    *,
    seed: int | str = 0,
    jitter_fraction: float = 0.0,
) -> tuple[ReleaseSlot, ...]:
    """The next wave: the first `pace.wave_size` of `route_ids` (parked order, duplicates
    once) from `start`, in groups of `pace.group_size` sharing a slot, each group as many
    slots after the last as it holds routes (a jitter moves a route within its group's
    span)."""
    if not 0 <= jitter_fraction < 1:
        raise ValueError(f"jitter_fraction {jitter_fraction} must be in [0, 1)")
    start = to_utc(start)
    chosen = tuple(dict.fromkeys(route_ids))[: pace.wave_size]
    group = pace.group_size
    slots = [
        ReleaseSlot(
            route_id,
            start
            + timedelta(
                seconds=pace.slot_s
                * group
                * (position // group + jitter_fraction * hashed_jitter(seed, route_id))
            ),
        )
        for position, route_id in enumerate(chosen)
    ]
    return tuple(sorted(slots, key=lambda slot: (slot.release_at, slot.route_id)))


def next_pace(
    pace: ReleasePace,
    wave: Sequence[ReleaseSlot],
    *,
    absorbed: int,
    observed_at: datetime,
    earlier: tuple[int, datetime] | None = None,
    tolerance: timedelta = DEFAULT_TOLERANCE,
    speedup: float = DEFAULT_SPEEDUP,
) -> ReleasePace:
    """The pace after `wave`, of which `absorbed` routes had been absorbed at
    `observed_at`; `earlier` = (absorbed, when) at the first look that found any. On
    time (every slot up to `tolerance` before `observed_at` absorbed): a step faster.
    Late: the pace carried between the two looks (the fixed delay from a slot to its
    absorption is not a pace, so it is left out); with no two looks apart, it stays.
    Every wave after the first lasts a whole interval."""
    if not 0 < speedup <= 1:
        raise ValueError(f"speedup {speedup} must be in (0, 1]")
    observed_at = to_utc(observed_at)
    due = sum(1 for slot in wave if slot.release_at <= observed_at - tolerance)
    slot_s = pace.slot_s
    if absorbed >= due:
        slot_s = pace.slot_s * speedup
    elif earlier is not None and absorbed > earlier[0]:
        carried = (observed_at - to_utc(earlier[1])).total_seconds()
        slot_s = carried / (absorbed - earlier[0])
    return replace(
        pace, slot_s=min(pace.max_slot_s, max(pace.budget_slot_s, slot_s)),
        wave_s=pace.interval_s or pace.wave_s,
    )  # fmt: skip


def absorbed_enough(pace: ReleasePace, wave_size: int, absorbed: int, lead: timedelta) -> bool:
    """Whether the next wave may be planned now: every route of the last wave absorbed
    but those the current pace absorbs while the next is delivered (`lead`), and never
    fewer than half of them (so the pace seen is the wave's, not the one before)."""
    ahead = min(wave_size // 2, math.ceil(lead.total_seconds() / pace.slot_s - 1e-9))
    return absorbed >= wave_size - ahead


def next_start(
    pace: ReleasePace, wave: Sequence[ReleaseSlot], now: datetime, lead: timedelta
) -> datetime:
    """When the next wave's first slot is: after the last wave's last group, as many of
    the budget's slots as that group held (and at least one group at `pace`), and no
    sooner than `lead` from `now` (the time its delivery is expected to take)."""
    earliest = to_utc(now) + lead
    if not wave:
        return earliest
    last = max(slot.release_at for slot in wave)
    held = sum(1 for slot in wave if slot.release_at == last)
    gap = max(pace.slot_s * pace.group_size, pace.budget_slot_s * held)
    return max(last + timedelta(seconds=gap), earliest)
