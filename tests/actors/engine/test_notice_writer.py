"""The attempt-write path: one `retrying: true` notice per task session, reused, repaired,
and never inserted as a fallback. Runs on the in-memory port, on the Redis transcript over
fakeredis and (integration tier) over the session's real Redis."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from pydantic import JsonValue

from actors.clock import ManualClock
from actors.engine.notices import NoticeWriter, WriteOutcome
from actors.store.transcript import TranscriptMessage
from tests.actors.engine.notice_ports import PortKind, port_kind, retrying_ids, seed
from tests.actors.engine.transcript_fakes import (
    FaultyTranscript,
    MemoryTranscript,
    notice_metadata,
)
from tests.actors.route_builders import T0

__all__ = ["port_kind"]  # the fixture, used by name


def test_a_session_without_a_notice_gets_one_created_once(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            outcome = await NoticeWriter(port).write(
                "task-1", "route-1", "retry 1 of 3", notice_metadata(1)
            )
            listed = await port.list_session_messages("task-1", "route-1")
        assert outcome.status == "created"
        assert listed == [outcome.message]
        assert outcome.message is not None
        assert outcome.message.kind == "status"
        assert outcome.message.content == "retry 1 of 3"
        assert outcome.message.metadata == notice_metadata(1)

    asyncio.run(scenario())


def test_the_next_attempt_updates_the_same_notice_keeping_its_identity(
    port_kind: PortKind,
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            first = await seed(port, port_kind.clock, turn_id="turn-1", age=timedelta(seconds=9))
            writer = NoticeWriter(port)
            outcome = await writer.write("task-1", "route-1", "retry 2 of 3", notice_metadata(2))
            listed = await port.list_session_messages("task-1", "route-1")
        assert outcome.status == "updated"
        assert outcome.message == first.model_copy(
            update={"content": "retry 2 of 3", "metadata": notice_metadata(2)}
        )
        assert listed == [outcome.message]

    asyncio.run(scenario())


def test_duplicates_leave_the_newest_by_creation_time_and_are_deleted(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            clock = port_kind.clock
            oldest = await seed(port, clock, age=timedelta(minutes=30))
            newest = await seed(port, clock, age=timedelta(minutes=1))
            middle = await seed(port, clock, age=timedelta(minutes=10))
            outcome = await NoticeWriter(port).write("task-1", "route-1", "r", notice_metadata(4))
            left = await retrying_ids(port)
        assert outcome.status == "updated"
        assert outcome.message is not None
        assert outcome.message.id == newest.id
        assert (outcome.duplicates_deleted, outcome.duplicates_failed) == (2, 0)
        assert left == [newest.id]
        assert oldest.id not in left
        assert middle.id not in left

    asyncio.run(scenario())


def test_duplicates_created_at_the_same_time_keep_the_greatest_id(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            tied = [await seed(port, port_kind.clock) for _ in range(4)]
            outcome = await NoticeWriter(port).write("task-1", "route-1", "r", notice_metadata(2))
            left = await retrying_ids(port)
        assert left == [max(m.id for m in tied)]
        assert outcome.message is not None
        assert outcome.message.id == left[0]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "metadata",
    [{"retrying": "true"}, {"retrying": 1}, {"retrying": False}, {"retrying": None},
     {"retrying": [True]}, {}],
    ids=["string", "one", "false", "null", "list", "absent"],
)  # fmt: skip
def test_only_the_boolean_true_marks_a_notice(
    port_kind: PortKind, metadata: dict[str, JsonValue]
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            other = await seed(port, port_kind.clock, metadata=metadata)
            outcome = await NoticeWriter(port).write("task-1", "route-1", "r", notice_metadata(1))
            listed = await port.list_session_messages("task-1", "route-1")
        assert outcome.status == "created"
        assert other in listed
        assert len(listed) == 2

    asyncio.run(scenario())


def test_another_kind_task_or_session_is_never_reused_nor_deleted(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            clock = port_kind.clock
            recovery = await seed(port, clock, kind="recovery")
            foreign_task = await seed(port, clock, task_id="task-2")
            foreign_session = await seed(port, clock, session_id="route-2")
            outcome = await NoticeWriter(port).write("task-1", "route-1", "r", notice_metadata(1))
            mine = await port.list_session_messages("task-1", "route-1")
            theirs = [
                *await port.list_session_messages("task-2", "route-1"),
                *await port.list_session_messages("task-1", "route-2"),
            ]
        assert outcome.status == "created"
        assert recovery in mine
        assert theirs == [foreign_task, foreign_session]

    asyncio.run(scenario())


def test_a_port_listing_foreign_messages_still_touches_only_the_exact_pair() -> None:
    class Promiscuous(FaultyTranscript):
        async def list_session_messages(
            self, task_id: str, session_id: str
        ) -> list[TranscriptMessage]:
            foreign = await super().list_session_messages("task-2", session_id)
            return [*foreign, *await super().list_session_messages(task_id, session_id)]

    async def scenario() -> None:
        memory = MemoryTranscript(ManualClock(T0))
        foreign = memory.seed(task_id="task-2", age=timedelta(seconds=1))
        outcome = await NoticeWriter(Promiscuous(memory)).write(
            "task-1", "route-1", "r", notice_metadata(1)
        )
        assert outcome.status == "created"
        assert foreign.id in memory.messages
        assert memory.messages[foreign.id] == foreign

    asyncio.run(scenario())


def test_metadata_without_the_boolean_retrying_true_is_refused(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            with pytest.raises(ValueError, match="retrying: true"):
                await NoticeWriter(port).write("task-1", "route-1", "r", {"retrying": "true"})
            assert await port.list_session_messages("task-1", "route-1") == []

    asyncio.run(scenario())


@pytest.mark.parametrize("failing", ["list", "create"])
def test_a_failed_list_or_create_of_a_new_notice_inserts_nothing(
    port_kind: PortKind, failing: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> WriteOutcome:
        async with port_kind.open() as port:
            faulty = FaultyTranscript(port)
            faulty.failing = {failing}
            outcome = await NoticeWriter(faulty).write("task-1", "route-1", "r", notice_metadata(1))
            assert await port.list_session_messages("task-1", "route-1") == []
            assert faulty.calls.count("create") == (1 if failing == "create" else 0)
            return outcome

    outcome = asyncio.run(scenario())
    assert (outcome.status, outcome.failed_step, outcome.message) == ("failed", failing, None)
    assert "retry notice of task 'task-1' session 'route-1' not" in caplog.text


def test_a_failed_update_inserts_nothing_and_deletes_no_duplicate(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            older = await seed(port, port_kind.clock, age=timedelta(minutes=2))
            newer = await seed(port, port_kind.clock, age=timedelta(minutes=1))
            faulty = FaultyTranscript(port)
            faulty.failing = {"update"}
            outcome = await NoticeWriter(faulty).write("task-1", "route-1", "r", notice_metadata(2))
            assert (outcome.status, outcome.failed_step) == ("failed", "update")
            assert faulty.calls == ["list", "update"]
            assert await retrying_ids(port) == sorted([older.id, newer.id])

    asyncio.run(scenario())


def test_an_update_of_a_notice_deleted_meanwhile_inserts_nothing(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            notice = await seed(port, port_kind.clock)
            faulty = FaultyTranscript(port)
            gate = faulty.gate("update")
            writer = asyncio.create_task(
                NoticeWriter(faulty).write("task-1", "route-1", "r", notice_metadata(2))
            )
            await gate.entered.wait()
            await port.delete_message(notice.id)  # a racing cleanup
            gate.release.set()
            outcome = await writer
            assert (outcome.status, outcome.failed_step) == ("failed", "update")
            assert await port.list_session_messages("task-1", "route-1") == []

    asyncio.run(scenario())


def test_a_failed_duplicate_deletion_is_repaired_by_the_next_write(port_kind: PortKind) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            stale = await seed(port, port_kind.clock, age=timedelta(minutes=5))
            live = await seed(port, port_kind.clock)
            faulty = FaultyTranscript(port)
            faulty.failing_ids = {stale.id}
            writer = NoticeWriter(faulty)
            first = await writer.write("task-1", "route-1", "retry 2", notice_metadata(2))
            assert (first.status, first.duplicates_deleted, first.duplicates_failed) == (
                "updated", 0, 1,
            )  # fmt: skip
            assert await retrying_ids(port) == sorted([stale.id, live.id])
            faulty.failing_ids = set()
            second = await writer.write("task-1", "route-1", "retry 3", notice_metadata(3))
            assert (second.status, second.duplicates_deleted) == ("updated", 1)
            assert await retrying_ids(port) == [live.id]

    asyncio.run(scenario())
