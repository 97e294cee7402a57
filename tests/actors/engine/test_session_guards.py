"""The session guard table: reference counts taken before the lock, ownership, the retired
watermark and its five-minute fence, reclamation. A manual clock and scheduler: no sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest

from actors.clock import ManualClock
from actors.engine.schedulers import Cancellable, LoopScheduler, ManualScheduler
from actors.engine.session_guards import (
    LATE_EVENT_FENCE,
    ExecutionIdentity,
    Reservation,
    Retirement,
    SessionGuards,
)
from actors.errors import InvalidRouteIdError
from actors.keys import AttemptFence
from tests.actors.route_builders import T0

S = "route-1"


def attempt(generation: int, ordinal: int, session: str = S) -> AttemptFence:
    return AttemptFence(session, generation, ordinal)


def identity(generation: int, ordinal: int, session: str = S) -> ExecutionIdentity:
    made = ExecutionIdentity.of(
        task_id="task-1", session_id=session, execution_id=f"inv-{generation}-{ordinal}",
        generation=generation, attempt_ordinal=ordinal,
    )  # fmt: skip
    assert made is not None
    return made


def table() -> tuple[SessionGuards, ManualScheduler]:
    scheduler = ManualScheduler(ManualClock(T0))
    return SessionGuards(scheduler.clock, scheduler), scheduler


def test_an_entry_nothing_owns_is_reclaimed_when_its_last_user_leaves() -> None:
    async def scenario() -> None:
        guards, _ = table()
        async with guards.hold(S) as held:
            assert guards.live_entries == 1
            assert held.entry.users == 1
        assert guards.live_entries == 0

    asyncio.run(scenario())


def test_a_waiter_is_counted_before_the_lock_so_nobody_sees_a_replacement() -> None:
    async def scenario() -> None:
        guards, _ = table()
        inside: list[str] = []
        seen_locks: list[asyncio.Lock] = []
        first_in = asyncio.Event()
        let_first_go = asyncio.Event()

        async def first() -> None:
            async with guards.hold(S) as held:
                seen_locks.append(held.entry.lock)
                first_in.set()
                await let_first_go.wait()

        async def later(name: str, holding: asyncio.Event) -> None:
            # Nothing suspends between this signal and the lock's wait inside `hold`, so
            # once the signal is seen the waiter is queued on the lock.
            holding.set()
            async with guards.hold(S) as held:
                seen_locks.append(held.entry.lock)
                inside.append(name)
                assert len(inside) == 1  # one holder at a time
                await asyncio.sleep(0)
                inside.remove(name)

        holder = asyncio.create_task(first())
        await first_in.wait()
        holding = [asyncio.Event() for _ in range(3)]
        waiters = [
            asyncio.create_task(later(f"waiter-{n}", signal)) for n, signal in enumerate(holding)
        ]
        await asyncio.gather(*(signal.wait() for signal in holding))
        entry = guards.entries[S]
        # asyncio.Lock keeps its waiters' futures in `_waiters`: every waiter is blocked there
        assert len(entry.lock._waiters or ()) == 3
        assert entry.users == 4
        let_first_go.set()
        await holder  # it left with nothing owned: the waiters keep the entry alive
        assert guards.entries.get(S) is entry
        await asyncio.gather(*waiters)
        assert len(seen_locks) == 4
        assert {id(lock) for lock in seen_locks} == {id(entry.lock)}
        assert guards.live_entries == 0

    asyncio.run(scenario())


def test_a_waiter_cancelled_before_the_lock_gives_its_count_back() -> None:
    async def scenario() -> None:
        guards, _ = table()
        release = asyncio.Event()
        held = asyncio.Event()

        async def holder() -> None:
            async with guards.hold(S):
                held.set()
                await release.wait()

        async def waiter() -> None:
            async with guards.hold(S):
                raise AssertionError("never gets the guard")

        first = asyncio.create_task(holder())
        await held.wait()
        second = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        assert guards.entries[S].users == 2
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        assert guards.entries[S].users == 1
        release.set()
        await first
        assert guards.live_entries == 0

    asyncio.run(scenario())


def test_a_retired_entry_lives_exactly_until_its_fence_expires() -> None:
    async def scenario() -> None:
        guards, scheduler = table()
        async with guards.hold(S) as held:
            assert held.reserve_retry(attempt(1, 1)).reserved
        assert guards.live_entries == 1  # owned by the retry
        scheduler.advance(timedelta(hours=1))
        assert guards.live_entries == 1  # ownership is not timed
        async with guards.hold(S) as held:
            held.retire(attempt(1, 1))
        scheduler.advance(LATE_EVENT_FENCE - timedelta(seconds=1))
        assert guards.live_entries == 1
        assert guards.is_late(attempt(1, 1))
        scheduler.advance(timedelta(seconds=1))
        assert guards.live_entries == 0
        assert not guards.is_late(attempt(1, 1))
        assert scheduler.pending == 0

    asyncio.run(scenario())


def test_an_entry_held_when_its_fence_expires_goes_with_its_last_user() -> None:
    async def scenario() -> None:
        guards, scheduler = table()
        async with guards.hold(S) as held:
            held.retire(attempt(1, 1))
        async with guards.hold(S):
            scheduler.advance(LATE_EVENT_FENCE)
            assert guards.live_entries == 1
        assert guards.live_entries == 0
        assert guards.entries_past_fence() == []

    asyncio.run(scenario())


def test_a_fence_timer_that_fires_early_waits_out_the_rest() -> None:
    class EarlyScheduler:
        def __init__(self) -> None:
            self.calls: list[tuple[float, Callable[[], None]]] = []

        def call_later(self, delay_s: float, callback: Callable[[], None]) -> Cancellable:
            self.calls.append((delay_s, callback))
            return asyncio.get_running_loop().call_later(3600, lambda: None)

    async def scenario() -> None:
        clock = ManualClock(T0)
        early = EarlyScheduler()
        guards = SessionGuards(clock, early)
        async with guards.hold(S) as held:
            held.retire(attempt(1, 1))
        delay, fire = early.calls[-1]
        assert delay == LATE_EVENT_FENCE.total_seconds()
        clock.advance(LATE_EVENT_FENCE - timedelta(milliseconds=1))
        fire()  # 1 ms early, as uvloop may
        assert guards.live_entries == 1
        assert early.calls[-1][0] == pytest.approx(0.001)
        clock.advance(timedelta(milliseconds=1))
        early.calls[-1][1]()
        assert guards.live_entries == 0

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "missing", ["task_id", "session_id", "execution_id", "generation", "attempt_ordinal"]
)
def test_prompt_evidence_without_a_complete_identity_opens_nothing(missing: str) -> None:
    parts: dict[str, object] = {
        "task_id": "task-1", "session_id": S, "execution_id": "inv-1",
        "generation": 1, "attempt_ordinal": 0,
    }  # fmt: skip
    for bad in (None, "", True, -1):
        incomplete = ExecutionIdentity.of(**{**parts, missing: bad})  # type: ignore[arg-type]  # what is refused
        assert incomplete is None, (missing, bad)

    async def scenario() -> None:
        guards, scheduler = table()
        async with guards.hold(S) as held:
            held.retire(attempt(1, 1))
            assert not held.accept_prompt(None)
            assert not held.entry.owned
        scheduler.advance(LATE_EVENT_FENCE)
        assert guards.live_entries == 0

    asyncio.run(scenario())


def test_a_complete_identity_of_a_new_attempt_owns_the_session_again() -> None:
    async def scenario() -> None:
        guards, scheduler = table()
        async with guards.hold(S) as held:
            held.retire(attempt(1, 1))
            assert held.accept_prompt(identity(1, 2))
            assert held.entry.owned
            assert held.entry.fence_until is None
        scheduler.advance(LATE_EVENT_FENCE * 3)
        assert guards.live_entries == 1
        assert guards.is_late(attempt(1, 1))  # the watermark stays while the entry lives
        assert not guards.is_late(attempt(1, 2))

    asyncio.run(scenario())


def test_prompt_evidence_for_a_retired_or_superseded_attempt_is_late() -> None:
    async def scenario() -> None:
        guards, _ = table()
        async with guards.hold(S) as held:
            held.reserve_retry(attempt(2, 3))
            assert not held.accept_prompt(identity(2, 2))  # superseded by the retry
            assert held.accept_prompt(identity(2, 3))  # the retry's own dispatch
            held.retire(attempt(2, 3))
            assert not held.accept_prompt(identity(2, 3))  # late: retired
            assert not held.accept_prompt(identity(1, 9))  # an older generation
            assert not held.entry.owned
        with pytest.raises(ValueError, match="offered to session"):
            async with guards.hold("route-2") as other:
                other.accept_prompt(identity(3, 0))

    asyncio.run(scenario())


def test_a_later_reservation_supersedes_and_an_earlier_one_is_refused() -> None:
    async def scenario() -> None:
        guards, _ = table()
        async with guards.hold(S) as held:
            assert held.reserve_retry(attempt(1, 1)) == Reservation(True)
            assert held.reserve_retry(attempt(1, 1)) == Reservation(True)  # idempotent
            assert held.reserve_retry(attempt(1, 2)) == Reservation(True, attempt(1, 1))
            assert held.reserve_retry(attempt(1, 1)) == Reservation(False)
            assert held.reserve_retry(attempt(2, 0)) == Reservation(True, attempt(1, 2))
            assert held.entry.retry_attempt == attempt(2, 0)
            assert not held.entry.retry_armed

    asyncio.run(scenario())


def test_a_retry_is_armed_only_as_the_reserved_attempt_and_never_after_retirement() -> None:
    async def scenario() -> None:
        guards, _ = table()
        async with guards.hold(S) as held:
            held.accept_prompt(identity(1, 0))
            assert not held.arm_retry(attempt(1, 1))  # nothing reserved
            held.reserve_retry(attempt(1, 1))
            assert held.entry.prompt is not None  # the failed turn is still completing
            held.reserve_retry(attempt(1, 2))
            assert not held.arm_retry(attempt(1, 1))  # superseded
            assert held.arm_retry(attempt(1, 2))
            assert held.entry.retry_armed
            assert held.entry.prompt is None  # the failed turn completed
            held.retire(attempt(1, 2))
            assert not held.arm_retry(attempt(1, 2))

    asyncio.run(scenario())


def test_notice_writes_are_allowed_only_for_live_current_attempts() -> None:
    async def scenario() -> None:
        guards, _ = table()
        async with guards.hold(S) as held:
            assert held.may_write(attempt(1, 1))  # nothing known yet (a rehydrated host)
            held.reserve_retry(attempt(1, 2))
            assert not held.may_write(attempt(1, 1))
            assert held.may_write(attempt(1, 2))
            held.retire()
            assert not held.may_write(attempt(1, 2))
            assert held.may_write(attempt(1, 3))

    asyncio.run(scenario())


def test_retirement_raises_the_watermark_to_the_latest_attempt_it_ends() -> None:
    async def scenario() -> None:
        guards, _ = table()
        async with guards.hold(S) as held:
            held.reserve_retry(attempt(2, 3))
            ended = held.retire()
            assert ended == Retirement(True, False, attempt(2, 3))
            assert held.retire(attempt(1, 9)) == Retirement(False, False, attempt(2, 3))
            held.accept_prompt(identity(3, 0))
            assert held.retire() == Retirement(False, True, attempt(3, 0))
            assert held.retire(attempt(3, 5)) == Retirement(False, False, attempt(3, 5))
            assert not held.entry.owned

    asyncio.run(scenario())


def test_a_later_retry_that_reached_the_guard_first_survives_an_earlier_retirement() -> None:
    """Committed: cancel of attempt 1, a resume, attempt 2's failure; the guard sees
    attempt 2's reservation first. The cancel's retirement retires attempt 1 only."""

    async def scenario() -> None:
        guards, scheduler = table()
        async with guards.hold(S) as held:
            held.reserve_retry(attempt(1, 1))
            held.reserve_retry(attempt(1, 2))
            assert held.retire(attempt(1, 1)) == Retirement(False, False, attempt(1, 1), True)
            assert held.entry.retry_attempt == attempt(1, 2)
            assert held.entry.fence_until is None
            assert held.may_write(attempt(1, 2))
            assert not held.may_write(attempt(1, 1))
        scheduler.advance(LATE_EVENT_FENCE)
        assert guards.live_entries == 1

    asyncio.run(scenario())


def test_an_earlier_retirement_ends_an_old_retry_but_not_a_new_generations_prompt() -> None:
    """Committed: a skip ended attempt (1, 3), then the next candidate's start (2, 0); the
    guard sees the start first. The retirement ends the old retry, the prompt stays."""

    async def scenario() -> None:
        guards, _ = table()
        async with guards.hold(S) as held:
            held.reserve_retry(attempt(1, 3))
            assert held.accept_prompt(identity(2, 0))
            assert held.retire(attempt(1, 3)) == Retirement(True, False, attempt(1, 3))
            assert held.entry.prompt == identity(2, 0)
            assert held.entry.retry is None
            assert held.entry.fence_until is None  # still owned by the prompt
            assert not held.reserve_retry(attempt(1, 4)).reserved
            assert held.reserve_retry(attempt(2, 1)).reserved

    asyncio.run(scenario())


def test_a_deleted_session_refuses_everything_until_it_is_reclaimed() -> None:
    async def scenario() -> None:
        guards, scheduler = table()
        async with guards.hold(S) as held:
            held.reserve_retry(attempt(1, 1))
            closed = held.close(attempt(1, 1))
            assert closed.had_retry
            assert not held.accept_prompt(identity(5, 0))
            assert not held.reserve_retry(attempt(5, 1)).reserved
            assert not held.may_write(attempt(5, 1))
        assert guards.is_late(attempt(9, 9))
        scheduler.advance(LATE_EVENT_FENCE)
        assert guards.live_entries == 0
        async with guards.hold(S) as fresh:
            assert not fresh.entry.closed
            assert fresh.entry.watermark is None

    asyncio.run(scenario())


def test_is_late_reads_only_and_never_creates_an_entry() -> None:
    guards, _ = table()
    assert not guards.is_late(attempt(1, 1))
    assert guards.live_entries == 0


def test_a_held_session_is_unusable_once_its_guard_is_released() -> None:
    async def scenario() -> None:
        guards, _ = table()
        async with guards.hold(S) as held:
            pass
        with pytest.raises(RuntimeError, match="released"):
            held.reserve_retry(attempt(1, 1))

    asyncio.run(scenario())


def test_bad_session_ids_attempts_and_fences_are_refused() -> None:
    async def scenario() -> None:
        guards, _ = table()
        with pytest.raises(InvalidRouteIdError):
            async with guards.hold("route 1"):
                pass
        async with guards.hold(S) as held:
            with pytest.raises(ValueError, match="offered to session"):
                held.reserve_retry(attempt(1, 1, session="route-2"))
            with pytest.raises(ValueError, match="offered to session"):
                held.retire(attempt(1, 1, session="route-2"))
        assert guards.live_entries == 0

    asyncio.run(scenario())
    with pytest.raises(ValueError, match="fence must be positive"):
        SessionGuards(ManualClock(T0), LoopScheduler(), fence=timedelta(0))


def test_a_thousand_retired_sessions_leave_nothing_after_the_fence() -> None:
    async def scenario() -> None:
        guards, scheduler = table()
        for n in range(1000):
            session = f"route-{n}"
            async with guards.hold(session) as held:
                held.reserve_retry(attempt(1, 1, session))
                held.arm_retry(attempt(1, 1, session))
            async with guards.hold(session) as held:
                held.retire(attempt(1, 1, session))
        assert guards.live_entries == 1000
        scheduler.advance(LATE_EVENT_FENCE)
        assert guards.live_entries == 0
        assert scheduler.pending == 0

    asyncio.run(scenario())


def test_the_loop_scheduler_runs_the_fence_on_the_event_loop() -> None:
    async def scenario() -> None:
        clock = ManualClock(T0)
        guards = SessionGuards(clock, LoopScheduler(), fence=timedelta(microseconds=1))
        async with guards.hold(S) as held:
            held.retire(attempt(1, 1))
        clock.advance(timedelta(seconds=1))
        done = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, done.set_result, None)
        await done  # the fence timer (1 µs) is due before this one
        assert guards.live_entries == 0

    asyncio.run(scenario())


def test_the_manual_scheduler_runs_callbacks_in_due_order_at_their_time() -> None:
    clock = ManualClock(T0)
    scheduler = ManualScheduler(clock)
    seen: list[tuple[str, float]] = []

    def note(name: str) -> Callable[[], None]:
        return lambda: seen.append((name, (clock.now() - T0).total_seconds()))

    scheduler.call_later(5, note("b"))
    scheduler.call_later(1, note("a"))
    cancelled = scheduler.call_later(3, note("never"))
    scheduler.call_later(5, note("c"))
    cancelled.cancel()
    assert scheduler.pending == 3
    assert scheduler.advance(timedelta(seconds=10)) == 3
    assert seen == [("a", 1.0), ("b", 5.0), ("c", 5.0)]
    assert clock.now() == T0 + timedelta(seconds=10)
    assert scheduler.pending == 0


def test_the_table_reports_its_owned_entries_and_those_past_their_fence() -> None:
    """What a host answers about its guard table (RouteHost.notice_counts, session_guard):
    an entry whose fence is over but whose timer has not run yet is counted past it."""

    async def scenario() -> None:
        guards, scheduler = table()
        async with guards.hold("prompted") as held:
            assert held.accept_prompt(identity(1, 0, "prompted"))
        async with guards.hold("retrying") as held:
            assert held.reserve_retry(attempt(1, 1, "retrying")).reserved
            assert held.arm_retry(attempt(1, 1, "retrying"))
        async with guards.hold("retired") as held:
            held.retire(attempt(1, 2, "retired"))
        assert guards.counts() == {"guards": 3, "guards_owned": 2, "guards_past_fence": 0}
        prompted, retrying, retired = (guards.view(s) for s in ("prompted", "retrying", "retired"))
        assert prompted is not None
        assert (prompted.prompt, prompted.retry) == (attempt(1, 0, "prompted"), None)
        assert retrying is not None
        assert (retrying.retry, retrying.retry_armed, retrying.prompt) == (
            attempt(1, 1, "retrying"), True, None,
        )  # fmt: skip
        assert retired is not None
        assert (retired.watermark, retired.fence_until) == (
            attempt(1, 2, "retired"), T0 + LATE_EVENT_FENCE,
        )  # fmt: skip
        assert (retired.users, retired.closed) == (0, False)
        assert guards.view("never-seen") is None
        scheduler.clock.advance(LATE_EVENT_FENCE)  # the fence is over; its timer not run yet
        assert guards.counts()["guards_past_fence"] == 1
        scheduler.run_due()
        assert guards.counts() == {"guards": 2, "guards_owned": 2, "guards_past_fence": 0}

    asyncio.run(scenario())
