"""Retirement: every `retrying: true` message of the task session deleted, past individual
failures; and the port fault matrix of the whole write/cleanup path."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta

import pytest

from actors.engine.notices import NoticeResolver, NoticeWriter, Resolution
from tests.actors.engine.notice_ports import PortKind, port_kind, retrying_ids, seed
from tests.actors.engine.transcript_fakes import FaultyTranscript, notice_metadata

__all__ = ["port_kind"]  # the fixture, used by name


def test_retirement_deletes_every_retrying_message_of_the_pair_and_nothing_else(
    port_kind: PortKind,
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            clock = port_kind.clock
            notices = [await seed(port, clock, age=timedelta(minutes=m)) for m in (1, 2, 3)]
            odd_kind = await seed(port, clock, kind="message")
            recovery = await seed(port, clock, kind="recovery", metadata={"recovery": True})
            settled = await seed(port, clock, metadata={"retrying": False})
            textual = await seed(port, clock, metadata={"retrying": "true"})
            foreign = await seed(port, clock, task_id="task-2")
            resolution = await NoticeResolver(port).retire("task-1", "route-1")
            left = await port.list_session_messages("task-1", "route-1")
            theirs = await port.list_session_messages("task-2", "route-1")
        assert resolution == Resolution(looked=True, listed=True, deleted=4, failed=0)
        assert resolution.clean
        assert {m.id for m in left} == {recovery.id, settled.id, textual.id}
        assert odd_kind not in left
        assert all(n not in left for n in notices)
        assert theirs == [foreign]

    asyncio.run(scenario())


def test_retirement_goes_on_past_a_deletion_that_fails(
    port_kind: PortKind, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            notices = [await seed(port, port_kind.clock) for _ in range(5)]
            faulty = FaultyTranscript(port)
            faulty.failing_ids = {notices[1].id, notices[3].id}
            resolution = await NoticeResolver(faulty).retire("task-1", "route-1")
            assert resolution == Resolution(looked=True, listed=True, deleted=3, failed=2)
            assert not resolution.clean
            assert await retrying_ids(port) == sorted([notices[1].id, notices[3].id])
            faulty.failing_ids = set()
            again = await NoticeResolver(faulty).retire("task-1", "route-1")
            assert (again.deleted, again.failed) == (2, 0)
            assert await retrying_ids(port) == []

    asyncio.run(scenario())
    assert "not deleted: delete failed" in caplog.text


def test_a_failed_listing_is_logged_and_deletes_nothing(
    port_kind: PortKind, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            notice = await seed(port, port_kind.clock)
            faulty = FaultyTranscript(port)
            faulty.failing = {"list"}
            resolution = await NoticeResolver(faulty).retire("task-1", "route-1")
            assert resolution == Resolution(looked=True, listed=False)
            assert not resolution.clean
            assert await retrying_ids(port) == [notice.id]

    asyncio.run(scenario())
    assert "not retired: list failed" in caplog.text


def test_retiring_a_session_without_notices_is_clean(port_kind: PortKind) -> None:
    async def scenario() -> Resolution:
        async with port_kind.open() as port:
            return await NoticeResolver(port).retire("task-1", "route-1")

    assert asyncio.run(scenario()) == Resolution(looked=True, listed=True)


FAULTS = ("list", "update", "delete")
FAULT_SETS = [set(chosen) for size in (1, 2, 3) for chosen in itertools.combinations(FAULTS, size)]


@pytest.mark.parametrize("faults", FAULT_SETS, ids=lambda f: "+".join(sorted(f)))
def test_port_faults_insert_nothing_and_the_next_write_and_cleanup_repair(
    port_kind: PortKind, faults: set[str]
) -> None:
    """A notice and a legacy duplicate exist; a write fails with `faults`: nothing is
    inserted as a fallback (and a cleanup under the same faults neither raises nor
    inserts). Once the port heals, the next write leaves exactly one notice and the next
    cleanup none."""

    async def scenario() -> None:
        async with port_kind.open() as port:
            duplicate = await seed(port, port_kind.clock, age=timedelta(minutes=3))
            live = await seed(port, port_kind.clock, age=timedelta(minutes=1))
            faulty = FaultyTranscript(port)
            faulty.failing = set(faults)
            writer, resolver = NoticeWriter(faulty), NoticeResolver(faulty)
            outcome = await writer.write("task-1", "route-1", "retry 2", notice_metadata(2))
            assert outcome.status in ("failed", "updated")
            assert "create" not in faulty.calls
            await resolver.retire("task-1", "route-1")
            assert "create" not in faulty.calls
            left = await retrying_ids(port)
            assert set(left) <= {duplicate.id, live.id}
            faulty.failing = set()
            healed = await writer.write("task-1", "route-1", "retry 3", notice_metadata(3))
            assert healed.status in ("updated", "created")
            assert len(await retrying_ids(port)) == 1
            assert (await resolver.retire("task-1", "route-1")).clean
            assert await retrying_ids(port) == []

    asyncio.run(scenario())


@pytest.mark.parametrize("faults", FAULT_SETS, ids=lambda f: "+".join(sorted(f)))
def test_port_faults_on_a_session_without_a_notice_create_nothing(
    port_kind: PortKind, faults: set[str]
) -> None:
    async def scenario() -> None:
        async with port_kind.open() as port:
            faulty = FaultyTranscript(port)
            faulty.failing = set(faults)
            outcome = await NoticeWriter(faulty).write("task-1", "route-1", "r", notice_metadata(1))
            created = "list" not in faults
            assert outcome.status == ("created" if created else "failed")
            assert faulty.calls.count("create") == (1 if created else 0)
            assert len(await retrying_ids(port)) == (1 if created else 0)
            faulty.failing = set()
            assert (await NoticeResolver(faulty).retire("task-1", "route-1")).clean
            assert await retrying_ids(port) == []

    asyncio.run(scenario())
