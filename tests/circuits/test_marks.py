"""The marks a closed circuit keeps decide exactly as every mark would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from circuits import CircuitSettings
from circuits.marks import (
    FailureMark,
    directly_qualify,
    latest_reset,
    models_qualify,
    qualifies,
    retained,
)

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
WIDE = CircuitSettings(max_recent_failures=100_000)


Raw = tuple[int, str, str | None, int | None, bool, bool]


def mark(  # noqa: PLR0917 - one mark's fields
    seconds: int, route: str, model: str | None, reset: int | None, opens: bool, wide: bool = False
) -> FailureMark:
    return FailureMark(
        at=T0 + timedelta(seconds=seconds),
        route_id=route,
        code="provider_overloaded",
        reset_at=None if reset is None else T0 + timedelta(seconds=reset),
        model=model,
        opens=opens,
        min_models=2 if wide else 1,
    )


marks_of = st.lists(
    st.builds(
        lambda *fields: fields,
        st.integers(0, 5),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from([None, "m1", "m2", "m3"]),
        st.one_of(st.none(), st.integers(0, 200)),
        st.booleans(),
        st.booleans(),
    ),
    max_size=40,
)
knobs = st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(1, 3))


def timeline(raw: list[Raw]) -> tuple[FailureMark, ...]:
    seconds, out = 0, []
    for gap, route, model, reset, opens, wide in raw:
        seconds += gap
        at_reset = None if reset is None else seconds + reset
        out.append(mark(seconds, route, model, at_reset, opens, wide))
    return tuple(out)


def decisions(marks: tuple[FailureMark, ...], config: CircuitSettings, min_models: int,
              now: datetime) -> tuple[bool, bool, bool, datetime | None]:  # fmt: skip
    return (
        qualifies(marks, config),
        directly_qualify(marks, config),
        models_qualify(marks, config, min_models),
        latest_reset(marks, now),
    )


@settings(max_examples=400, deadline=None, derandomize=True)
@given(marks_of, marks_of, knobs, st.integers(0, 120))
def test_kept_marks_decide_as_all_marks_for_any_later_window_and_newer_marks(
    earlier: list[Raw],
    later: list[Raw],
    knob: tuple[int, int, int],
    window_start_s: int,
) -> None:
    threshold, routes, min_models = knob
    config = WIDE.model_copy(
        update={"transient_threshold": threshold, "min_distinct_routes": routes}
    )
    everything = timeline(earlier + later)
    head = everything[: len(earlier)]
    kept = (*retained(head, config), *everything[len(earlier) :])
    horizon = T0 + timedelta(seconds=window_start_s)
    now = everything[-1].at if everything else T0
    full_window = tuple(m for m in everything if m.at > horizon)
    kept_window = tuple(m for m in kept if m.at > horizon)
    assert decisions(kept_window, config, min_models, now) == decisions(
        full_window, config, min_models, now
    )


def test_a_busy_circuit_keeps_a_handful_of_marks_not_its_whole_window() -> None:
    config = CircuitSettings(transient_threshold=3, min_distinct_routes=2)
    busy = tuple(mark(i, f"route-{i}", "m1", None, False) for i in range(1000))
    kept = retained(busy, config)
    assert [m.route_id for m in kept] == ["route-997", "route-998", "route-999"]


def test_the_cap_still_bounds_what_is_kept() -> None:
    config = CircuitSettings(transient_threshold=3, max_recent_failures=4)
    resets = tuple(mark(i, "a", f"m{i}", 1000 - i, False) for i in range(50))
    assert len(retained(resets, config)) == 4
