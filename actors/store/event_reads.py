"""Following the route events stream and the transcript stream together, from a cursor.

A cursor is the last id read on each stream (`StreamCursor`); `read_after` blocks on one
XREAD of both streams for up to `block_ms` and answers at most `count` entries per stream,
decoded as the stores decode them (route_codec for transitions, the Redis transcript for
messages), oldest first by stream id across the two. An entry that does not decode is
answered as `unreadable` (its id still moves the cursor on), never an exception that ends
a reader. Reading from explicit ids, never `$`, loses nothing between two calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.errors import StoreUnavailableError
from actors.keys import KeySpace
from actors.routes.models import RouteEvent
from actors.store.redis_transcript import decode_event as decode_transcript_event
from actors.store.replies import reply_text, reply_texts
from actors.store.route_codec import decode_event as decode_route_event
from actors.store.transcript import TranscriptEvent

STREAM_ID: Final = re.compile(r"(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,19})")
Stream = Literal["routes", "transcript"]


@dataclass(frozen=True, slots=True)
class StreamCursor:
    """The last id read on the route events stream and on the transcript stream."""

    routes: str = "0-0"
    transcript: str = "0-0"

    def __str__(self) -> str:
        return f"{self.routes},{self.transcript}"

    @classmethod
    def parse(cls, text: str) -> StreamCursor:
        """A cursor from its text (`<routes id>,<transcript id>`); ValueError otherwise."""
        routes, comma, transcript = text.strip().partition(",")
        if not comma or not STREAM_ID.fullmatch(routes) or not STREAM_ID.fullmatch(transcript):
            raise ValueError("must be '<route events id>,<transcript id>' (Redis stream ids)")
        return cls(routes, transcript)

    def moved(self, stream: Stream, entry_id: str) -> StreamCursor:
        return replace(self, **{stream: entry_id})


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One entry read: its stream, id, decoded event (None: it did not decode) and the
    cursor once it is read."""

    stream: Stream
    entry_id: str
    event: RouteEvent | TranscriptEvent | None
    cursor: StreamCursor


async def newest(client: Redis, keys: KeySpace) -> StreamCursor:
    """The cursor at the newest entry of each stream ("0-0" for an empty one): reading
    after it answers only what is written from now on."""
    try:
        async with client.pipeline(transaction=False) as pipe:
            pipe.xrevrange(keys.events, count=1)
            pipe.xrevrange(keys.transcript, count=1)
            routes, transcript = await pipe.execute()
    except RedisError as error:
        raise StoreUnavailableError("events read", str(error) or type(error).__name__) from error
    return StreamCursor(_first_id(routes), _first_id(transcript))


def _first_id(entries: Any) -> str:
    return reply_text(entries[0][0]) if entries else "0-0"


async def read_after(
    client: Redis, keys: KeySpace, cursor: StreamCursor, *, count: int, block_ms: int
) -> list[StreamEntry]:
    """The entries after `cursor` (waiting up to `block_ms` for the first), at most
    `count` per stream, oldest first."""
    names: dict[str, Stream] = {keys.events: "routes", keys.transcript: "transcript"}
    try:
        reply: Any = await client.xread(
            {keys.events: cursor.routes, keys.transcript: cursor.transcript},
            count=count, block=block_ms,
        )  # fmt: skip
    except RedisError as error:
        raise StoreUnavailableError("events read", str(error) or type(error).__name__) from error
    found: list[tuple[tuple[int, int], Stream, str, Any]] = []
    for name, entries in reply or []:
        stream = names[reply_text(name)]
        for entry_id, fields in entries:
            text = reply_text(entry_id)
            found.append((_order(text), stream, text, fields))
    found.sort(key=lambda item: (item[0], item[1]))
    answered: list[StreamEntry] = []
    for _, stream, entry_id, fields in found:
        cursor = cursor.moved(stream, entry_id)
        answered.append(StreamEntry(stream, entry_id, _decoded(stream, entry_id, fields), cursor))
    return answered


def _order(entry_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition("-")
    return int(milliseconds), int(sequence or 0)


def _decoded(stream: Stream, entry_id: str, fields: Any) -> RouteEvent | TranscriptEvent | None:
    raw = reply_texts(fields)
    try:
        if stream == "routes":
            return decode_route_event(entry_id, raw)
        return decode_transcript_event(entry_id, raw)
    except (StoreUnavailableError, ValidationError, ValueError):
        return None
