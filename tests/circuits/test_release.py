"""Controlled release: budgeted waves, one per interval, deterministic jitter inside."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

import pytest

from circuits import hashed_jitter, plan_release, wave_budget
from tests.circuits.builders import T0, at

ROUTES = [f"route-{i:04d}" for i in range(1000)]


@pytest.mark.parametrize(
    ("parked", "budget"), [(0, 1), (1, 1), (4, 1), (5, 1), (9, 1), (10, 2), (1000, 200)]
)
def test_the_wave_budget_is_a_fifth_of_the_parked_routes_but_at_least_one(
    parked: int, budget: int
) -> None:
    assert wave_budget(parked) == budget


@pytest.mark.parametrize(("parked", "fraction"), [(-1, 0.2), (10, 0.0), (10, 1.5)])
def test_a_nonsensical_budget_is_refused(parked: int, fraction: float) -> None:
    with pytest.raises(ValueError, match="must"):
        wave_budget(parked, fraction)


def test_a_thousand_parked_routes_leave_in_five_waves_of_two_hundred_one_second_apart() -> None:
    plan = plan_release(ROUTES, T0, seed=7)
    assert plan.budget == 200
    assert [len(wave) for wave in plan.waves] == [200] * 5
    for index, wave in enumerate(plan.waves):  # each 1.1 s long: 10 % headroom
        for slot in wave:
            assert at(1.1 * index) <= slot.release_at < at(1.1 * (index + 1))
    assert sorted(slot.route_id for slot in plan.slots) == ROUTES
    assert len(plan) == 1000


@pytest.mark.parametrize("parked", [5, 999, 1000, 1234])
def test_no_window_of_one_second_aligned_or_not_holds_more_than_the_budget(parked: int) -> None:
    plan = plan_release([f"r{i}" for i in range(parked)], T0, seed=3)
    times = sorted(slot.release_at for slot in plan.slots)
    busiest = max(
        sum(1 for t in times[i:] if t <= start + timedelta(seconds=1))  # closed windows
        for i, start in enumerate(times)
    )
    assert busiest <= plan.budget
    assert busiest >= plan.budget * 0.85  # the headroom is a tenth, no more


def test_a_wave_is_spread_evenly_over_its_interval_in_parked_order() -> None:
    plan = plan_release(["a", "b", "c", "d", "e"], T0, wave_fraction=0.8)
    assert plan.budget == 4
    assert [(s.route_id, s.release_at) for s in plan.slots] == [
        ("a", at(0)), ("b", at(0.275)), ("c", at(0.55)), ("d", at(0.825)), ("e", at(1.1)),
    ]  # fmt: skip


def test_every_route_is_released_exactly_once_in_parked_order_of_waves() -> None:
    plan = plan_release(["c", "a", "b", "a", "d", "c"], T0, seed=1)
    assert plan.budget == 1
    assert [slot.route_id for slot in plan.slots] == ["c", "a", "b", "d"]
    assert [slot.release_at for slot in plan.slots] == sorted(s.release_at for s in plan.slots)


def test_the_jitter_is_deterministic_per_seed() -> None:
    first = plan_release(ROUTES[:50], T0, seed="abc", jitter_fraction=0.5)
    assert plan_release(ROUTES[:50], T0, seed="abc", jitter_fraction=0.5) == first
    assert plan_release(ROUTES[:50], T0, seed="abd", jitter_fraction=0.5) != first
    spread = {slot.release_at for slot in first.slots}
    assert len(spread) > 40


def test_an_injected_uniform_source_replaces_the_hashed_jitter() -> None:
    plan = plan_release(ROUTES[:20], T0, uniform=random.Random(3).random)
    again = plan_release(ROUTES[:20], T0, uniform=random.Random(3).random)
    assert plan == again
    fixed = plan_release(ROUTES[:10], T0, uniform=lambda: 0.0, jitter_fraction=0.5)
    even = plan_release(ROUTES[:10], T0)
    assert fixed == even
    assert Counter(slot.release_at for slot in fixed.slots) == {at(0.55 * i): 1 for i in range(10)}


def test_a_uniform_source_outside_the_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        plan_release(["a"], T0, uniform=lambda: 1.0)


def test_wave_interval_and_fraction_are_configurable() -> None:
    plan = plan_release(ROUTES[:100], T0, wave_fraction=0.5, wave_interval=timedelta(seconds=3))
    assert [len(wave) for wave in plan.waves] == [50, 50]
    assert [slot.release_at for slot in plan.waves[1]] == [
        at(3.3 * (50 + i) / 50) for i in range(50)
    ]


@pytest.mark.parametrize(
    "changes",
    [{"wave_interval": timedelta(0)}, {"jitter_fraction": 1.0}, {"jitter_fraction": -0.1}],
)
def test_nonsensical_release_settings_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="must"):
        plan_release(ROUTES[:3], T0, **changes)  # type: ignore[arg-type]


def test_no_parked_routes_make_an_empty_plan() -> None:
    plan = plan_release([], T0)
    assert plan.waves == ()
    assert plan.slots == ()


def test_hashed_jitter_stays_in_the_unit_interval() -> None:
    values = [hashed_jitter(5, route) for route in ROUTES]
    assert all(0 <= v < 1 for v in values)
    assert min(values) < 0.05
    assert max(values) > 0.95
