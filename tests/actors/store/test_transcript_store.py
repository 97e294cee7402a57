"""The Redis transcript: messages readable with redis-cli, each change atomic with its event
on `<p>:transcript`. Each test runs on fakeredis (unit tier) and on the session's real
Redis (integration tier)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import fakeredis
import pytest
from fakeredis.aioredis import FakeRedis
from pydantic import ValidationError

from actors.clock import ManualClock
from actors.errors import InvalidIdentifierError, MessageNotFoundError, StoreUnavailableError
from actors.keys import KeySpace
from actors.store.redis_transcript import RedisTranscript
from actors.store.transcript import TranscriptMessage, TranscriptPort
from tests.actors.conftest import Backend, unique_keys
from tests.actors.route_builders import T0

NOTICE: dict[str, Any] = {"retrying": True, "retry_ordinal": 1, "actions": ["cancel"]}


@asynccontextmanager
async def transcript(backend: Backend, *, maxlen: int = 1000) -> AsyncIterator[RedisTranscript]:
    store = RedisTranscript(
        backend.raw(), clock=backend.clock, keys=backend.keys, maxlen=maxlen, owns_client=True
    )
    async with store:
        yield store


async def create(store: RedisTranscript, **overrides: Any) -> TranscriptMessage:
    fields: dict[str, Any] = {
        "task_id": "task-1", "session_id": "route-1", "kind": "status",
        "content": "retry 1 of 3", "metadata": NOTICE,
    } | overrides  # fmt: skip
    task_id, session_id = fields.pop("task_id"), fields.pop("session_id")
    return await store.create_message(task_id, session_id, **fields)


def test_the_redis_transcript_is_a_transcript_port(backend: Backend) -> None:
    async def scenario() -> None:
        async with transcript(backend) as store:
            assert isinstance(store, TranscriptPort)

    asyncio.run(scenario())


def test_a_created_message_is_listed_and_readable_as_redis_cli_sees_it(backend: Backend) -> None:
    async def scenario() -> None:
        raw = backend.raw()
        async with transcript(backend) as store:
            message = await create(store, turn_id="turn-7")
            assert await store.list_session_messages("task-1", "route-1") == [message]
            stored = await raw.hgetall(backend.keys.message(message.id))
            index = await raw.zrange(
                backend.keys.session_messages("task-1", "route-1"), 0, -1, withscores=True
            )
            sessions = await raw.smembers(backend.keys.transcript_sessions)
        await raw.aclose()
        assert stored == {
            "id": message.id, "task_id": "task-1", "session_id": "route-1",
            "created_at": T0.isoformat(), "kind": "status", "content": "retry 1 of 3",
            "metadata": '{"retrying":true,"retry_ordinal":1,"actions":["cancel"]}',
            "turn_id": "turn-7",
        }  # fmt: skip
        assert index == [(message.id, T0.timestamp())]
        assert sessions == {"task-1:route-1"}
        assert message.created_at == T0
        assert len(message.id) == 32

    asyncio.run(scenario())


def test_messages_list_oldest_first_then_by_id(backend: Backend) -> None:
    async def scenario() -> None:
        async with transcript(backend) as store:
            later = await create(store, content="later")
            backend.clock.advance(timedelta(seconds=-5))
            earliest = await create(store, content="earliest")
            backend.clock.advance(timedelta(seconds=5))
            tied = await create(store, content="tied with later")
            listed = await store.list_session_messages("task-1", "route-1")
        first_two_ids = sorted([later.id, tied.id])
        assert [m.id for m in listed] == [earliest.id, *first_two_ids]

    asyncio.run(scenario())


def test_a_session_lists_only_its_own_task_and_session(backend: Backend) -> None:
    async def scenario() -> None:
        async with transcript(backend) as store:
            mine = await create(store)
            await create(store, task_id="task-2")
            await create(store, session_id="route-2")
            assert await store.list_session_messages("task-1", "route-1") == [mine]
            assert await store.list_session_messages("task-9", "route-1") == []
            assert await store.sessions() == [
                ("task-1", "route-1"), ("task-1", "route-2"), ("task-2", "route-1"),
            ]  # fmt: skip

    asyncio.run(scenario())


def test_an_update_keeps_identity_creation_time_and_turn(backend: Backend) -> None:
    async def scenario() -> None:
        async with transcript(backend) as store:
            message = await create(store, turn_id="turn-7")
            backend.clock.advance(timedelta(seconds=30))
            updated = await store.update_message(
                message.id, "retry 2 of 3", {"retrying": True, "retry_ordinal": 2}
            )
            listed = await store.list_session_messages("task-1", "route-1")
        assert updated == message.model_copy(
            update={"content": "retry 2 of 3", "metadata": {"retrying": True, "retry_ordinal": 2}}
        )
        assert listed == [updated]

    asyncio.run(scenario())


def test_every_change_is_published_once_in_order_with_the_whole_message(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with transcript(backend) as store:
            message = await create(store)
            updated = await store.update_message(message.id, "retry 2", {"retrying": True})
            await store.delete_message(message.id)
            await store.delete_message(message.id)  # already gone: nothing published
            events = await store.events()
            tail = await store.events(after=events[0].event_id)
        assert [e.event for e in events] == [
            "session.message.updated", "session.message.updated", "session.message.deleted",
        ]  # fmt: skip
        assert [e.message for e in events] == [message, updated, None]
        assert {(e.message_id, e.task_id, e.session_id) for e in events} == {
            (message.id, "task-1", "route-1")
        }
        assert tail == events[1:]

    asyncio.run(scenario())


def test_the_stream_entries_read_plainly_in_redis_cli(backend: Backend) -> None:
    async def scenario() -> None:
        raw = backend.raw()
        async with transcript(backend) as store:
            message = await create(store)
            await store.delete_message(message.id)
            entries: Any = await raw.xrange(backend.keys.transcript)
        await raw.aclose()
        (_, upsert), (_, deleted) = entries
        assert upsert["event"] == "session.message.updated"
        assert upsert["content"] == "retry 1 of 3"
        assert upsert["metadata"] == '{"retrying":true,"retry_ordinal":1,"actions":["cancel"]}'
        assert deleted == {
            "event": "session.message.deleted", "id": message.id,
            "task_id": "task-1", "session_id": "route-1",
        }  # fmt: skip

    asyncio.run(scenario())


def test_updating_a_missing_message_raises_and_publishes_nothing(backend: Backend) -> None:
    async def scenario() -> None:
        async with transcript(backend) as store:
            message = await create(store)
            await store.delete_message(message.id)
            before = len(await store.events())
            with pytest.raises(MessageNotFoundError) as caught:
                await store.update_message(message.id, "retry 2", {"retrying": True})
            assert len(await store.events()) == before
            assert await store.list_session_messages("task-1", "route-1") == []
        assert caught.value.message_id == message.id

    asyncio.run(scenario())


def test_deleting_the_last_message_removes_every_key_of_the_session(backend: Backend) -> None:
    async def scenario() -> None:
        raw = backend.raw()
        async with transcript(backend) as store:
            first, second = await create(store), await create(store)
            await store.delete_message(first.id)
            assert await store.sessions() == [("task-1", "route-1")]
            await store.delete_message(second.id)
            left = [k async for k in raw.scan_iter(match=backend.keys.pattern())]
        await raw.aclose()
        assert left == [backend.keys.transcript]  # only the stream of what happened

    asyncio.run(scenario())


def test_the_stream_stays_bounded_by_its_maxlen(backend: Backend) -> None:
    async def scenario() -> int:
        async with transcript(backend, maxlen=10) as store:
            message = await create(store)
            for ordinal in range(400):
                await store.update_message(message.id, f"retry {ordinal}", {"retrying": True})
            raw = backend.raw()
            length: int = await raw.xlen(backend.keys.transcript)
            await raw.aclose()
            return length

    # MAXLEN ~ trims whole stream nodes (100 entries each by default), never below 10.
    assert 10 <= asyncio.run(scenario()) <= 10 + 100


def test_a_message_hash_that_does_not_decode_is_left_out_of_the_list(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> list[TranscriptMessage]:
        raw = backend.raw()
        async with transcript(backend) as store:
            good, bad = await create(store), await create(store)
            await raw.hset(backend.keys.message(bad.id), "metadata", "{not json")
            listed = await store.list_session_messages("task-1", "route-1")
        await raw.aclose()
        assert listed == [good]
        return listed

    asyncio.run(scenario())
    assert "unreadable transcript message" in caplog.text


def test_a_mutation_refused_by_a_wrongly_typed_key_writes_nothing(backend: Backend) -> None:
    async def scenario() -> None:
        raw = backend.raw()
        await raw.set(backend.keys.transcript, "not a stream")
        async with transcript(backend) as store:
            with pytest.raises(StoreUnavailableError) as caught:
                await create(store)
            assert await store.list_session_messages("task-1", "route-1") == []
        keys = [k async for k in raw.scan_iter(match=backend.keys.pattern())]
        await raw.aclose()
        assert keys == [backend.keys.transcript]
        assert caught.value.operation == "transcript create"
        assert "WRONGTYPE" in caught.value.detail

    asyncio.run(scenario())


def test_bad_identifiers_and_values_are_refused_before_anything_is_sent(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with transcript(backend) as store:
            with pytest.raises(InvalidIdentifierError):
                await create(store, task_id="task:1")
            with pytest.raises(InvalidIdentifierError):
                await create(store, session_id="route 1")
            with pytest.raises(ValidationError):
                await create(store, kind="Status!")
            with pytest.raises(ValidationError):
                await create(store, content="x" * 20_000)
            with pytest.raises(InvalidIdentifierError):
                await store.update_message("../etc", "c", {})
            with pytest.raises(InvalidIdentifierError):
                await store.delete_message("*")
            message = await create(store)
            with pytest.raises(ValidationError):
                await store.update_message(message.id, "x" * 20_000, {})
            with pytest.raises(ValidationError):
                await store.update_message(message.id, "c", {"bad": object()})  # type: ignore[dict-item]  # what is refused
            assert await store.list_session_messages("task-1", "route-1") == [message]
            assert len(await store.events()) == 1

    asyncio.run(scenario())


def test_a_maxlen_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="maxlen"):
        RedisTranscript(FakeRedis(), clock=ManualClock(T0), maxlen=0)


def _every_operation(store: RedisTranscript) -> dict[str, Callable[[], Awaitable[Any]]]:
    message_id = "0" * 32
    return {
        "list": lambda: store.list_session_messages("task-1", "route-1"),
        "create": lambda: create(store),
        "update": lambda: store.update_message(message_id, "c", {}),
        "delete": lambda: store.delete_message(message_id),
        "sessions": store.sessions,
        "events": store.events,
    }


OPERATIONS = ["list", "create", "update", "delete", "sessions", "events"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_redis_that_fails_raises_store_unavailable_naming_the_operation(operation: str) -> None:
    async def scenario() -> StoreUnavailableError:
        server = fakeredis.FakeServer()
        server.connected = False
        client = FakeRedis(server=server, decode_responses=True)
        store = RedisTranscript(client, clock=ManualClock(T0), keys=unique_keys())
        with pytest.raises(StoreUnavailableError) as caught:
            await _every_operation(store)[operation]()
        await client.aclose()
        return caught.value

    error = asyncio.run(scenario())
    assert error.operation == f"transcript {operation}"


def test_two_prefixes_never_see_each_other(backend: Backend) -> None:
    async def scenario() -> None:
        other = RedisTranscript(backend.raw(), clock=backend.clock, keys=KeySpace(
            f"{backend.keys.prefix}-other"), owns_client=True)  # fmt: skip
        async with transcript(backend) as store, other:
            await create(other)
            assert await store.list_session_messages("task-1", "route-1") == []
            assert await store.events() == []
        raw = backend.raw()
        stale = [k async for k in raw.scan_iter(match=other.keys.pattern())]
        if stale:
            await raw.delete(*stale)
        await raw.aclose()

    asyncio.run(scenario())
