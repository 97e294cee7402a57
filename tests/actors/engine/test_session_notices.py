"""The notice lifecycle under the session guard: the seed's notice scenarios (at the
lifecycle's level: the service's cancel wires them), the ordering fence under races, and the
counts a host exports."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from actors.clock import ManualClock
from actors.engine.notices import NOT_LOOKED, Resolution
from actors.engine.schedulers import ManualScheduler
from actors.engine.session_guards import LATE_EVENT_FENCE, ExecutionIdentity, SessionGuards
from actors.engine.session_notices import NoticeTally, SessionNotices
from actors.keys import AttemptFence
from actors.routes.notices import (
    NoticeContent,
    RecoveryFacts,
    RetryFacts,
    recovery_message,
    retry_notice,
)
from tests.actors.engine.notice_ports import PortKind, port_kind, retrying_ids, seed
from tests.actors.engine.transcript_fakes import FaultyTranscript, MemoryTranscript
from tests.actors.route_builders import T0

__all__ = ["port_kind"]  # the fixture, used by name

S, TASK = "route-1", "task-1"


def attempt(generation: int, ordinal: int) -> AttemptFence:
    return AttemptFence(S, generation, ordinal)


def notice_for(fence: AttemptFence, retry_ordinal: int = 1) -> NoticeContent:
    return retry_notice(RetryFacts(
        code="provider_overloaded", provider="anthropic", retry_ordinal=retry_ordinal,
        retry_max=5, deadline=T0 + timedelta(seconds=5 * retry_ordinal),
        generation=fence.generation, attempt_ordinal=fence.ordinal,
    ))  # fmt: skip


def prompt(fence: AttemptFence) -> ExecutionIdentity | None:
    return ExecutionIdentity.of(
        task_id=TASK, session_id=S, execution_id=f"inv-{fence.generation}-{fence.ordinal}",
        generation=fence.generation, attempt_ordinal=fence.ordinal,
    )  # fmt: skip


def lifecycle(port: FaultyTranscript, clock: ManualClock) -> tuple[SessionNotices, ManualScheduler]:
    scheduler = ManualScheduler(clock)
    return SessionNotices(port, SessionGuards(clock, scheduler)), scheduler


async def fail_attempt(notices: SessionNotices, fence: AttemptFence, ordinal: int = 1) -> None:
    """A failure transition scheduled `fence`: its notice, then (turn over) its arming."""
    outcome = await notices.write_attempt(TASK, fence, notice_for(fence, ordinal))
    assert outcome.written, outcome
    assert await notices.arm_retry(fence)


def test_scenario_a_retry_that_succeeds_leaves_no_notice_when_idle_or_reloaded(
    port_kind: PortKind,
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            faulty = FaultyTranscript(port)
            notices, scheduler = lifecycle(faulty, port_kind.clock)
            assert await notices.accept_prompt(prompt(attempt(1, 0)))
            await fail_attempt(notices, attempt(1, 1))
            assert len(await retrying_ids(port)) == 1
            assert await notices.accept_prompt(prompt(attempt(1, 1)))  # the retry's dispatch
            resolution = await notices.retire(TASK, S, attempt=attempt(1, 1))  # success
            assert resolution.deleted == 1
            scheduler.advance(LATE_EVENT_FENCE)  # the session idles
            assert await retrying_ids(port) == []  # a reload reads no notice
            assert notices.guards.live_entries == 0

    asyncio.run(scenario())


def test_a_success_without_a_retry_entry_does_not_read_the_transcript() -> None:
    async def scenario() -> None:
        faulty = FaultyTranscript(MemoryTranscript(ManualClock(T0)))
        notices, _ = lifecycle(faulty, ManualClock(T0))
        await notices.accept_prompt(prompt(attempt(1, 0)))
        assert await notices.retire(TASK, S, attempt=attempt(1, 0)) == NOT_LOOKED
        assert faulty.calls == []

    asyncio.run(scenario())


def test_scenario_cancel_after_the_loop_ended_retires_a_stale_notice_without_recovery(
    port_kind: PortKind,
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            stale = await seed(port, port_kind.clock, age=timedelta(minutes=20))
            notices, _ = lifecycle(FaultyTranscript(port), port_kind.clock)  # a fresh host
            resolution = await notices.retire(TASK, S, attempt=attempt(1, 3), force=True)
            listed = await port.list_session_messages(TASK, S)
        assert resolution == Resolution(looked=True, listed=True, deleted=1)
        assert stale not in listed
        assert listed == []  # no recovery message: nothing was active
        assert notices.tally.recovery_messages == 0

    asyncio.run(scenario())


def test_scenario_cancel_during_the_loop_retires_the_notice_and_offers_recovery(
    port_kind: PortKind,
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            notices, _ = lifecycle(FaultyTranscript(port), port_kind.clock)
            await fail_attempt(notices, attempt(2, 4))
            resolution = await notices.retire(TASK, S, attempt=attempt(2, 4), force=True)
            message = await notices.post_recovery(
                TASK, S, recovery_message(RecoveryFacts("provider_overloaded", "anthropic", 2, 4))
            )
            listed = await port.list_session_messages(TASK, S)
        assert resolution.deleted == 1
        assert message is not None
        assert listed == [message]
        assert message.kind == "recovery"
        assert message.metadata["actions"] == ["resume", "start_fresh"]
        assert "retrying" not in message.metadata

    asyncio.run(scenario())


def test_advancing_to_the_next_attempt_updates_the_same_notice(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            notices, _ = lifecycle(FaultyTranscript(port), port_kind.clock)
            first = await notices.write_attempt(TASK, attempt(1, 1), notice_for(attempt(1, 1), 1))
            await notices.arm_retry(attempt(1, 1))
            port_kind.clock.advance(timedelta(seconds=30))
            second = await notices.write_attempt(TASK, attempt(1, 2), notice_for(attempt(1, 2), 2))
            listed = await port.list_session_messages(TASK, S)
        assert (first.status, second.status) == ("created", "updated")
        assert second.superseded == attempt(1, 1)
        assert first.message is not None
        assert second.message is not None
        assert second.message.id == first.message.id
        assert second.message.created_at == first.message.created_at
        assert "retry 2 of 5" in second.message.content
        assert listed == [second.message]

    asyncio.run(scenario())


def test_a_superseded_or_retired_attempt_is_refused_without_a_store_call() -> None:
    async def scenario() -> None:
        faulty = FaultyTranscript(MemoryTranscript(ManualClock(T0)))
        notices, _ = lifecycle(faulty, ManualClock(T0))
        await fail_attempt(notices, attempt(1, 2))
        calls = len(faulty.calls)
        stale = await notices.write_attempt(TASK, attempt(1, 1), notice_for(attempt(1, 1)))
        assert stale.status == "refused"
        await notices.retire(TASK, S, attempt=attempt(1, 2), force=True)
        calls = len(faulty.calls)
        late = await notices.write_attempt(TASK, attempt(1, 2), notice_for(attempt(1, 2)))
        assert late.status == "refused"
        assert len(faulty.calls) == calls
        assert await retrying_ids(faulty.inner) == []
        assert notices.tally.refused == 2

    asyncio.run(scenario())


def test_a_write_that_races_a_retirement_and_loses_never_recreates_the_notice() -> None:
    """The retirement holds the guard (its list is held at a gate) when the write for the
    same attempt arrives: the write waits, then finds the attempt retired."""

    async def scenario() -> None:
        memory = MemoryTranscript(ManualClock(T0))
        faulty = FaultyTranscript(memory)
        notices, _ = lifecycle(faulty, ManualClock(T0))
        await fail_attempt(notices, attempt(1, 1))
        gate = faulty.gate("list")
        retiring = asyncio.create_task(notices.retire(TASK, S, attempt=attempt(1, 1), force=True))
        await gate.entered.wait()
        writing = asyncio.create_task(
            notices.write_attempt(TASK, attempt(1, 1), notice_for(attempt(1, 1)))
        )
        await asyncio.sleep(0)
        assert notices.guards.entries[S].users == 2  # the write waits on the guard
        gate.release.set()
        resolution, outcome = await asyncio.gather(retiring, writing)
        assert resolution.deleted == 1
        assert outcome.status == "refused"
        assert memory.retrying() == []

    asyncio.run(scenario())


def test_a_retirement_that_races_a_write_and_waits_removes_what_the_write_made() -> None:
    """The write holds the guard (its create is held at a gate) when the retirement comes:
    the retirement waits and then deletes the notice the write created."""

    async def scenario() -> None:
        memory = MemoryTranscript(ManualClock(T0))
        faulty = FaultyTranscript(memory)
        notices, _ = lifecycle(faulty, ManualClock(T0))
        gate = faulty.gate("create")
        writing = asyncio.create_task(
            notices.write_attempt(TASK, attempt(1, 1), notice_for(attempt(1, 1)))
        )
        await gate.entered.wait()
        retiring = asyncio.create_task(notices.retire(TASK, S, attempt=attempt(1, 1), force=True))
        await asyncio.sleep(0)
        gate.release.set()
        outcome, resolution = await asyncio.gather(writing, retiring)
        assert outcome.status == "created"
        assert resolution.deleted == 1
        assert memory.retrying() == []
        again = await notices.write_attempt(TASK, attempt(1, 1), notice_for(attempt(1, 1)))
        assert again.status == "refused"
        assert memory.retrying() == []

    asyncio.run(scenario())


def test_a_superseding_attempt_racing_a_cancel_cannot_recreate_the_notice() -> None:
    """Attempt 2's failure transition committed, then the cancel's (at attempt 2, the
    route's attempt then); the cancel's retirement deletes while attempt 2's write arrives:
    the write waits for the guard and is refused."""

    async def scenario() -> None:
        memory = MemoryTranscript(ManualClock(T0))
        faulty = FaultyTranscript(memory)
        notices, _ = lifecycle(faulty, ManualClock(T0))
        await fail_attempt(notices, attempt(1, 1))
        gate = faulty.gate("delete")
        cancel = asyncio.create_task(notices.retire(TASK, S, attempt=attempt(1, 2), force=True))
        await gate.entered.wait()
        fence = attempt(1, 2)
        superseding = asyncio.create_task(notices.write_attempt(TASK, fence, notice_for(fence, 2)))
        await asyncio.sleep(0)
        gate.release.set()
        resolution, outcome = await asyncio.gather(cancel, superseding)
        assert resolution.deleted == 1
        assert outcome.status == "refused"
        assert memory.retrying() == []

    asyncio.run(scenario())


def test_a_retirement_that_reaches_the_guard_after_a_later_attempt_leaves_its_notice() -> None:
    """Committed in order: a cancel of attempt 1, a resume, attempt 2's failure; attempt 2's
    write got the guard first. Its notice is the session's now: the cancel's retirement
    (even forced) reads and deletes nothing, and the notice goes with attempt 2's end."""

    async def scenario() -> None:
        memory = MemoryTranscript(ManualClock(T0))
        faulty = FaultyTranscript(memory)
        notices, _ = lifecycle(faulty, ManualClock(T0))
        await fail_attempt(notices, attempt(1, 1))
        await fail_attempt(notices, attempt(1, 2), 2)
        calls = len(faulty.calls)
        assert await notices.retire(TASK, S, attempt=attempt(1, 1), force=True) == NOT_LOOKED
        assert len(faulty.calls) == calls
        assert len(memory.retrying()) == 1
        assert (await notices.retire(TASK, S, attempt=attempt(1, 2))).deleted == 1
        assert memory.retrying() == []

    asyncio.run(scenario())


def test_deleting_a_session_retires_its_notices_and_refuses_late_writes(
    port_kind: PortKind,
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            notices, scheduler = lifecycle(FaultyTranscript(port), port_kind.clock)
            await fail_attempt(notices, attempt(1, 1))
            resolution = await notices.delete_session(TASK, S, attempt=attempt(1, 1))
            assert resolution.deleted == 1
            for fence in (attempt(1, 2), attempt(2, 0)):
                late = await notices.write_attempt(TASK, fence, notice_for(fence))
                assert late.status == "refused"
            assert not await notices.accept_prompt(prompt(attempt(3, 0)))
            assert await retrying_ids(port) == []
            scheduler.advance(LATE_EVENT_FENCE)
            assert notices.guards.live_entries == 0

    asyncio.run(scenario())


def test_the_tally_counts_what_a_host_exports() -> None:
    async def scenario() -> NoticeTally:
        memory = MemoryTranscript(ManualClock(T0))
        faulty = FaultyTranscript(memory)
        notices, _ = lifecycle(faulty, ManualClock(T0))
        duplicate = memory.seed(age=timedelta(minutes=9))
        memory.seed(age=timedelta(minutes=7))
        memory.seed(age=timedelta(minutes=5))
        faulty.failing_ids = {duplicate.id}
        await fail_attempt(notices, attempt(1, 1))  # updates one, repairs one, fails one
        faulty.failing = {"update"}
        failed = await notices.write_attempt(TASK, attempt(1, 2), notice_for(attempt(1, 2), 2))
        assert failed.status == "failed"
        faulty.failing = set()
        await notices.write_attempt(TASK, attempt(1, 1), notice_for(attempt(1, 1)))  # refused
        await notices.retire(TASK, S, attempt=attempt(1, 2), force=True)  # 1 of 2 fails
        faulty.failing = {"create"}
        assert await notices.post_recovery(TASK, S, recovery_message(
            RecoveryFacts(None, None, 1, 2))) is None  # fmt: skip
        faulty.failing = {"list"}
        await notices.retire(TASK, S, force=True)  # a failed listing
        return notices.tally

    assert asyncio.run(scenario()) == NoticeTally(
        written=1, refused=1, write_failures=1, retired=1, duplicates_repaired=1,
        cleanup_failures=3, recovery_messages=0, recovery_failures=1,
    )  # fmt: skip


def test_a_notice_of_the_wrong_kind_is_refused_before_the_guard() -> None:
    async def scenario() -> None:
        notices, _ = lifecycle(FaultyTranscript(MemoryTranscript(ManualClock(T0))), ManualClock(T0))
        recovery = recovery_message(RecoveryFacts(None, None, 1, 1))
        with pytest.raises(ValueError, match="retry notice has kind"):
            await notices.write_attempt(TASK, attempt(1, 1), recovery)
        with pytest.raises(ValueError, match="recovery message has kind"):
            await notices.post_recovery(TASK, S, notice_for(attempt(1, 1)))
        assert notices.guards.live_entries == 0

    asyncio.run(scenario())


def test_incomplete_prompt_evidence_is_refused_without_touching_the_table() -> None:
    async def scenario() -> None:
        notices, _ = lifecycle(FaultyTranscript(MemoryTranscript(ManualClock(T0))), ManualClock(T0))
        assert not await notices.accept_prompt(None)
        assert notices.guards.live_entries == 0

    asyncio.run(scenario())


def test_a_confirmed_prompt_is_read_under_the_guard_so_a_racing_retirement_ends_it() -> None:
    """A delivered dispatch is confirmed (a store read) under the session's guard: the
    retirement of its attempt's outcome, arriving meanwhile, waits and then ends it."""

    async def scenario() -> None:
        notices, _ = lifecycle(FaultyTranscript(MemoryTranscript(ManualClock(T0))), ManualClock(T0))
        await fail_attempt(notices, attempt(1, 1))
        reading, read_done = asyncio.Event(), asyncio.Event()

        async def confirm() -> ExecutionIdentity | None:
            reading.set()
            await read_done.wait()
            return prompt(attempt(1, 1))

        async def retire_when_queued(queued: asyncio.Event) -> Resolution:
            queued.set()  # nothing suspends from here to the guard's lock
            return await notices.retire(TASK, S, attempt=attempt(1, 1), force=True)

        accepting = asyncio.create_task(notices.accept_confirmed(S, confirm))
        await reading.wait()
        queued = asyncio.Event()
        retiring = asyncio.create_task(retire_when_queued(queued))
        await queued.wait()
        assert notices.guards.entries[S].users == 2  # the retirement waits on the guard
        read_done.set()
        accepted, resolution = await asyncio.gather(accepting, retiring)
        assert accepted is True
        assert notices.tally.prompts == 1
        assert resolution.listed
        view = notices.guards.view(S)
        assert view is not None
        assert (view.prompt, view.retry, view.watermark) == (None, None, attempt(1, 1))

    asyncio.run(scenario())


def test_a_confirmation_that_no_longer_holds_owns_nothing_and_leaves_no_entry() -> None:
    async def scenario() -> None:
        notices, _ = lifecycle(FaultyTranscript(MemoryTranscript(ManualClock(T0))), ManualClock(T0))

        async def gone() -> ExecutionIdentity | None:
            return None  # the route no longer retries that attempt

        assert await notices.accept_confirmed(S, gone) is False
        assert notices.guards.live_entries == 0
        assert notices.tally.prompts == 0

    asyncio.run(scenario())


def test_a_confirmed_prompt_of_a_retired_attempt_is_still_refused_by_the_guard() -> None:
    async def scenario() -> None:
        notices, _ = lifecycle(FaultyTranscript(MemoryTranscript(ManualClock(T0))), ManualClock(T0))
        await fail_attempt(notices, attempt(1, 1))
        await notices.retire(TASK, S, attempt=attempt(1, 1), force=True)

        async def stale() -> ExecutionIdentity | None:
            return prompt(attempt(1, 1))

        assert await notices.accept_confirmed(S, stale) is False
        assert notices.tally.prompts == 0
        view = notices.guards.view(S)
        assert view is not None
        assert (view.prompt, view.fence_until) == (None, T0 + LATE_EVENT_FENCE)

    asyncio.run(scenario())
