"""The demo report's invariants on hand-made facts: each check finds what it must find
(a schedule lost, a dispatch repeated or unexplained) and nothing else; timer lateness is
measured from the events' Redis write times."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actors.demo.dispatcher import DispatchRecord
from actors.demo.facts import NoticeFacts, RedisFacts, StreamEvent
from actors.demo.report import build_report, percentile, schedule_fates
from actors.routes.models import RouteEvent, ScheduleEntry

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def event(
    route: str, cause: str, state: str, *, generation: int = 1, ordinal: int = 0,
    deadline: datetime | None = None, decision: str | None = None, written: float = 0.0,
) -> StreamEvent:  # fmt: skip
    at = T0 + timedelta(seconds=written)
    data: dict[str, Any] = {
        "event_id": f"{int(at.timestamp() * 1000)}-0", "event": "route.transition",
        "route_id": route, "cause": cause, "decision": decision, "from_state": "active",
        "from_generation": generation, "state": state, "generation": generation,
        "retry_ordinal": 0, "retry_max": 0, "attempt_ordinal": ordinal, "deadline": deadline,
        "at": at,
    }  # fmt: skip
    return StreamEvent(RouteEvent.model_validate(data), at.timestamp())


def wait(route: str, ordinal: int, due_in: float, *, written: float = 0.0) -> StreamEvent:
    deadline = T0 + timedelta(seconds=written + due_in)
    return event(
        route, "report_failure", "retry_wait", ordinal=ordinal, deadline=deadline,
        decision="retry", written=written,
    )  # fmt: skip


def fired(route: str, ordinal: int, *, written: float) -> StreamEvent:
    return event(
        route, "deadline_reached", "retrying", ordinal=ordinal, decision="deadline_reached",
        written=written,
    )  # fmt: skip


def schedule(route: str, ordinal: int, deadline: datetime) -> ScheduleEntry:
    return ScheduleEntry(
        route_id=route, generation=1, state="retry_wait", deadline=deadline, ordinal=ordinal
    )


def dispatch(route: str, ordinal: int, at: float) -> DispatchRecord:
    return DispatchRecord(
        route_id=route, generation=1, ordinal=ordinal, candidate="claude", reason=None,
        provider_session_id=None, prompt_ref=None, worker="w", at=T0.timestamp() + at,
    )  # fmt: skip


def facts(
    events: list[StreamEvent], *, now: float = 100.0,
    schedules: dict[str, ScheduleEntry] | None = None,
    dispatches: list[DispatchRecord] | None = None,
) -> RedisFacts:  # fmt: skip
    held = schedules or {}
    return RedisFacts(
        now=T0.timestamp() + now, events=tuple(events), events_len=len(events), histories={},
        route_states={}, schedules=held,
        schedule_scores={r: s.deadline.timestamp() for r, s in held.items()},
        ledger_outcomes=Counter(), circuits=(), dispatches=tuple(dispatches or []),
        notices=NoticeFacts(written=0, retired=0, left=0),
    )  # fmt: skip


def test_a_fired_schedule_counts_its_lateness_from_the_write_time() -> None:
    fates = schedule_fates(facts([wait("a", 1, 2.0), fired("a", 1, written=2.25)]))
    assert (fates.fired, fates.cancelled, fates.pending, fates.lost) == (1, 0, 0, [])
    assert fates.lateness_s == [pytest.approx(0.25)]


def test_a_schedule_left_by_another_transition_is_cancelled() -> None:
    closing = event("a", "close", "closed", decision="close", written=1.0)
    fates = schedule_fates(facts([wait("a", 1, 5.0), closing]))
    assert (fates.fired, fates.cancelled, fates.lost) == (0, 1, [])


def test_a_schedule_written_again_for_the_same_attempt_is_rescheduled() -> None:
    parked = wait("a", 1, 60.0, written=1.0)
    fates = schedule_fates(facts([wait("a", 1, 1.0), parked, fired("a", 1, written=61.0)]))
    assert (fates.rescheduled, fates.fired, fates.cancelled, fates.lost) == (1, 1, 0, [])


def test_a_schedule_redis_still_holds_with_a_future_deadline_is_pending() -> None:
    written = wait("a", 1, 50.0)
    held = {"a": schedule("a", 1, T0 + timedelta(seconds=50))}
    fates = schedule_fates(facts([written], now=10.0, schedules=held))
    assert (fates.pending, fates.lost) == (1, [])


def test_a_schedule_gone_from_redis_without_an_event_is_lost() -> None:
    fates = schedule_fates(facts([wait("a", 1, 50.0)], now=10.0))
    assert fates.lost == ["a generation 1 ordinal 1"]


def test_an_overdue_schedule_redis_still_holds_is_lost() -> None:
    held = {"a": schedule("a", 1, T0 + timedelta(seconds=5))}
    fates = schedule_fates(facts([wait("a", 1, 5.0)], now=30.0, schedules=held))
    assert fates.lost == ["a generation 1 ordinal 1"]


def test_a_schedule_redis_holds_that_no_event_wrote_is_lost() -> None:
    held = {"b": schedule("b", 1, T0 + timedelta(seconds=50))}
    fates = schedule_fates(facts([], now=10.0, schedules=held))
    assert fates.lost == ["b (held by Redis, written by no event)"]


def test_a_repeated_dispatch_and_an_unexplained_one_break_the_invariants() -> None:
    events = [wait("a", 1, 1.0), fired("a", 1, written=1.0)]
    calls = [dispatch("a", 1, 1.1), dispatch("a", 1, 1.2), dispatch("a", 2, 1.3)]
    report = build_report(facts(events, dispatches=calls), {})
    assert report["invariants"] == {
        "double_dispatches": 1, "schedules_lost": 0, "unexplained_dispatches": 1,
        "notices_leaked": 0,
    }  # fmt: skip
    assert report["dispatch"]["doubled"] == ["a g1 o1"]
    assert report["ok"] is False


def test_a_clean_run_holds_every_invariant() -> None:
    events = [wait("a", 1, 1.0), fired("a", 1, written=1.002)]
    report = build_report(facts(events, dispatches=[dispatch("a", 1, 1.05)]), {})
    assert report["ok"] is True
    assert report["timer_lateness_ms"]["p50"] == pytest.approx(2.0, abs=0.1)
    assert report["dispatch"]["latency_ms"]["count"] == 1


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99)) == (50.0, 99.0)
    assert percentile([], 0.5) is None


def test_a_retry_notice_left_for_a_route_that_no_longer_retries_breaks_the_invariants() -> None:
    leaky = dataclasses.replace(
        facts([]), notices=NoticeFacts(written=3, retired=1, left=1, held=1)
    )
    report = build_report(leaky, {})
    assert report["invariants"]["notices_leaked"] == 1
    assert report["notices"] == {
        "written": 3, "retired": 1, "leaked": 1, "held_by_live_retries": 1,
    }  # fmt: skip
    assert report["ok"] is False
    held_only = dataclasses.replace(
        leaky, notices=NoticeFacts(written=3, retired=2, left=0, held=1)
    )
    assert build_report(held_only, {})["ok"] is True  # a live retry's notice is no leak
