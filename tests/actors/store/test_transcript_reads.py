"""The CLI's synchronous transcript reads see what the async transcript wrote."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import fakeredis
from fakeredis.aioredis import FakeRedis as AsyncFakeRedis

from actors.clock import ManualClock
from actors.keys import KeySpace
from actors.store.redis_transcript import RedisTranscript
from actors.store.transcript import TranscriptMessage
from actors.store.transcript_reads import read_notices, read_session_messages
from tests.actors.route_builders import T0

KEYS = KeySpace("recovery-reads")


def _written(server: fakeredis.FakeServer) -> dict[str, TranscriptMessage]:
    async def write() -> dict[str, TranscriptMessage]:
        clock = ManualClock(T0)
        client = AsyncFakeRedis(server=server, decode_responses=True)
        async with RedisTranscript(client, clock=clock, keys=KEYS, owns_client=True) as port:
            made = {
                "b": await port.create_message(
                    "task-1", "route-b", kind="status", content="n", metadata={"retrying": True}
                )
            }
            clock.advance(timedelta(seconds=1))
            made["recovery"] = await port.create_message(
                "task-1", "route-b", kind="recovery", content="r", metadata={"recovery": True}
            )
            clock.advance(timedelta(seconds=-5))
            made["a"] = await port.create_message(
                "task-2", "route-a", kind="status", content="n", metadata={"retrying": True}
            )
            made["a-other-task"] = await port.create_message(
                "task-9", "route-a", kind="status", content="n", metadata={"retrying": True}
            )
            return made

    return asyncio.run(write())


def test_read_notices_lists_every_sessions_notices_by_session() -> None:
    server = fakeredis.FakeServer()
    made = _written(server)
    client = fakeredis.FakeRedis(server=server, decode_responses=True)
    every = read_notices(client, KEYS)
    route_a = sorted([made["a"].id, made["a-other-task"].id])  # one creation time: by id
    assert [m.id for m in every] == [*route_a, made["b"].id]
    assert read_notices(client, KEYS, "route-b") == [made["b"]]
    assert read_notices(client, KEYS, "route-z") == []
    assert read_session_messages(client, KEYS, "task-1", "route-b") == [
        made["b"], made["recovery"],
    ]  # fmt: skip


def test_a_foreign_member_of_the_sessions_set_is_never_turned_into_a_key() -> None:
    client = fakeredis.FakeRedis(decode_responses=True)
    client.sadd(KEYS.transcript_sessions, "bad member:*", "nocolon")
    assert read_notices(client, KEYS) == []
