"""Paced release (circuits.pacing): one wave at a time, at the pace the runtime absorbed,
never faster than the budget."""

from __future__ import annotations

from datetime import timedelta

import pytest

from circuits import (
    ReleasePace,
    ReleaseSlot,
    absorbed_enough,
    first_pace,
    next_pace,
    next_start,
    plan_wave,
    wave_budget,
)
from tests.circuits.builders import T0, at

ROUTES = [f"route-{i:04d}" for i in range(1000)]


def test_before_anything_is_observed_the_pace_is_the_budget_for_a_quarter_interval() -> None:
    pace = first_pace(1000)
    assert pace.budget == wave_budget(1000) == 200
    assert pace.slot_s == pace.budget_slot_s == pytest.approx(1.1 / 200)
    assert (pace.wave_size, pace.group_size) == (50, 9)  # 9 routes a slot every 49.5 ms
    wave = plan_wave(ROUTES, T0, pace)
    assert [slot.route_id for slot in wave] == ROUTES[:50]  # parked order
    assert [s.release_at for s in wave[:10]] == [T0] * 9 + [at(9 * 1.1 / 200)]
    assert wave[-1].release_at == at(45 * 1.1 / 200)
    then = on_time(pace, wave)  # the budget kept: whole intervals from now on
    assert (then.slot_s, then.wave_size) == (pace.budget_slot_s, 200)


def on_time(pace: ReleasePace, wave: tuple[ReleaseSlot, ...]) -> ReleasePace:
    """The pace after every route of `wave` was absorbed 50 ms after its last slot."""
    return next_pace(
        pace, wave, absorbed=len(wave), observed_at=wave[-1].release_at + timedelta(seconds=0.05)
    )


def test_a_wave_absorbed_on_time_lets_the_next_go_faster_but_never_past_the_budget() -> None:
    pace = first_pace(1000)
    wave = plan_wave(ROUTES, T0, pace)
    slow = next_pace(pace, wave, absorbed=20, observed_at=at(1.0), earlier=(10, at(0.9)))
    assert slow.slot_s == pytest.approx(0.01)  # 10 carried in 0.1 s
    wave = plan_wave(ROUTES, T0, slow)
    faster = on_time(slow, wave)
    assert faster.slot_s == pytest.approx(slow.slot_s * 0.9)
    for _ in range(100):  # on time again and again: back to the budget, no further
        faster = on_time(faster, plan_wave(ROUTES, T0, faster))
    assert faster.slot_s == pace.budget_slot_s
    assert faster.wave_size == 200


def test_a_late_wave_sets_the_next_to_the_pace_carried_leaving_out_the_fixed_delay() -> None:
    pace = first_pace(1000)
    wave = plan_wave(ROUTES, T0, on_time(pace, plan_wave(ROUTES, T0, pace)))  # 200 in 1.1 s
    # the first absorbed 0.3 s after its slot, then ~100 a second: 151 by 1.8 s
    observed = next_pace(pace, wave, absorbed=151, observed_at=at(1.8), earlier=(1, at(0.3)))
    assert observed.slot_s == pytest.approx(1.5 / 150)  # ~100 a second carried
    assert observed.wave_size == 110  # a wave still lasts about one interval (1.1 s)
    assert observed.group_size == 5  # 5 routes a slot, every 50 ms
    assert plan_wave(ROUTES, T0, observed)[-1].release_at == at(105 * 0.01)


def test_with_no_two_looks_apart_a_late_wave_keeps_the_pace() -> None:
    pace = first_pace(1000)
    wave = plan_wave(ROUTES, T0, pace)
    for earlier in (None, (3, at(1.5))):
        kept = next_pace(pace, wave, absorbed=3, observed_at=at(1.5), earlier=earlier)
        assert kept.slot_s == pace.slot_s


def test_the_pace_never_slows_past_its_cap() -> None:
    pace = first_pace(1000)
    wave = plan_wave(ROUTES, T0, pace)
    stuck = next_pace(pace, wave, absorbed=2, observed_at=at(3600.0), earlier=(1, at(0.0)))
    assert stuck.slot_s == stuck.max_slot_s == 1.0
    assert stuck.wave_size == 1


def test_the_next_wave_is_planned_once_all_but_what_the_next_delivery_covers_are_absorbed() -> None:
    pace = first_pace(1000)  # a slot every 5.5 ms
    lead = timedelta(milliseconds=55)  # ten slots
    assert not absorbed_enough(pace, 200, 189, lead)
    assert absorbed_enough(pace, 200, 190, lead)
    assert not absorbed_enough(pace, 2, 0, lead)  # never before half of a wave
    assert absorbed_enough(pace, 2, 1, lead)
    assert absorbed_enough(pace, 0, 0, lead)  # nothing to wait on
    assert not absorbed_enough(pace, 200, 199, timedelta(0))


def test_any_one_interval_holds_at_most_the_budget_whatever_was_observed() -> None:
    pace = first_pace(1000)
    starts, slots = T0, []
    wave: tuple[ReleaseSlot, ...] = ()
    remaining = list(ROUTES)
    for turn in range(10_000):
        if not remaining:
            break
        starts = next_start(pace, wave, starts, timedelta(0))
        wave = plan_wave(remaining, starts, pace)
        slots += [slot.release_at for slot in wave]
        remaining = remaining[len(wave) :]
        late = turn % 3 == 1  # late every third wave, else on time
        pace = next_pace(
            pace, wave, absorbed=len(wave) // 2 if late else len(wave),
            observed_at=wave[-1].release_at + timedelta(seconds=0.5 if late else 0.0),
            earlier=(1, wave[0].release_at),
        )  # fmt: skip
    slots.sort()
    for index, first in enumerate(slots):  # a sliding window of one interval
        inside = [s for s in slots[index:] if s < first + timedelta(seconds=1)]
        assert len(inside) <= 200
    assert len(slots) == 1000


def test_the_next_wave_starts_a_group_after_the_last_and_no_sooner_than_the_lead() -> None:
    pace = first_pace(1000)
    wave = plan_wave(ROUTES, T0, pace)  # its last group holds 5 routes (45 to 49)
    after = wave[-1].release_at + timedelta(seconds=pace.slot_s * 9)
    assert next_start(pace, wave, T0, timedelta(milliseconds=100)) == after
    later = at(5.0)
    assert next_start(pace, wave, later, timedelta(milliseconds=100)) == at(5.1)
    assert next_start(pace, (), T0, timedelta(milliseconds=100)) == at(0.1)


def test_a_wave_takes_each_route_once_and_a_jitter_stays_inside_its_slot() -> None:
    assert [s.route_id for s in plan_wave(["a", "b", "a", "c"], T0, first_pace(4))] == ["a"]
    whole = first_pace(10, wave_fraction=1.0)
    whole = on_time(whole, plan_wave(["x"], T0, whole))  # a whole interval: three routes
    jittered = plan_wave(["a", "b", "a", "c"], T0, whole, seed=3, jitter_fraction=0.5)
    assert sorted(slot.route_id for slot in jittered) == ["a", "b", "c"]
    for slot, position in zip(sorted(jittered, key=lambda s: s.route_id), range(3), strict=True):
        assert at(position * whole.slot_s) <= slot.release_at < at((position + 1) * whole.slot_s)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: first_pace(10, wave_interval=timedelta(0)), "wave_interval"),
        (lambda: first_pace(10, headroom=2.0), "headroom"),
        (lambda: plan_wave(ROUTES, T0, first_pace(10), jitter_fraction=1.0), "jitter"),
        (lambda: next_pace(first_pace(10), (), absorbed=0, observed_at=T0, speedup=0), "speedup"),
    ],
)
def test_nonsensical_pacing_is_refused(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match):
        call()


def test_no_headroom_no_shared_slots_and_a_small_budget_shares_none() -> None:
    assert first_pace(1000, headroom=0.0).group_size == 1  # groups would break the budget
    assert first_pace(50).group_size == 1  # 10 a wave: not one to spare
    assert first_pace(1000).group_size == 9  # 18 to spare; 9 fill 50 ms


def test_a_slower_pace_after_a_big_group_keeps_the_budget_across_the_waves() -> None:
    pace = first_pace(1000)
    wave = plan_wave(ROUTES, T0, pace)  # groups of 9
    slower = next_pace(pace, wave, absorbed=20, observed_at=at(0.5), earlier=(10, at(0.45)))
    start = next_start(slower, wave, T0, timedelta(0))
    assert start - wave[-1].release_at >= timedelta(seconds=5 * pace.budget_slot_s)
    second = plan_wave(ROUTES[50:], start, slower)
    times = sorted(s.release_at for s in (*wave, *second))
    for index, first in enumerate(times):
        assert sum(1 for t in times[index:] if t < first + timedelta(seconds=1)) <= 200
