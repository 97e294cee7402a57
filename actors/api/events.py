"""`GET /events`: Server-Sent Events from the route events stream and the transcript
stream, resumable with `Last-Event-ID`.

Each event is one stream entry:

    id: 1733140800123-0,1733140799001-0
    event: route.transition            (or session.message.updated / .deleted)
    data: {"event_id": "1733140800123-0", "route_id": "session-42", …}

`id` is the cursor once that entry is read: the last id on the route events stream and on
the transcript stream. A client that reconnects with it as `Last-Event-ID` (browsers'
EventSource does so by itself; `?last_event_id=` for a first connection) gets every entry
after it that the streams still hold (each is trimmed to about its MAXLEN). Without one
the stream starts at the newest entries: only what is written from then on. A comment
line (`: keep-alive`) is sent whenever `KEEPALIVE_MS` pass without an entry, so a proxy
keeps the connection and a gone client is noticed.

Memory is bounded per client: one XREAD of at most `BATCH` entries per stream, written to
the socket (the client's pace) before the next is read. At most `max_event_streams`
streams are served at once (each holds one Redis connection while it waits); one more is
refused with 503.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from redis.asyncio import Redis

from actors.api.problems import COMMON_ANSWERS, header_field, simple
from actors.errors import StoreUnavailableError, error_text
from actors.keys import KeySpace
from actors.store.event_reads import StreamCursor, StreamEntry, newest, read_after

BATCH: Final = 100
KEEPALIVE_MS: Final = 15_000
STREAM_TIMEOUT_S: Final = KEEPALIVE_MS / 1000 + 10.0  # a reply may take the whole block
CURSOR_PATTERN: Final = r"^[0-9]{1,20}-[0-9]{1,20},[0-9]{1,20}-[0-9]{1,20}$"


@dataclass
class EventStreams:
    """The event streams of one app: their client (of the app's loop), how many are open
    now, and the signal that ends them all (the server is stopping)."""

    client: Redis
    keys: KeySpace
    limit: int
    open: int = 0
    keepalive_ms: int = KEEPALIVE_MS
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self) -> None:
        """End every stream at its next step (called in the app's loop)."""
        self.stopping.set()

    async def aclose(self) -> None:
        self.stop()
        await self.client.aclose()


def events_router(streams: Callable[[Request], EventStreams]) -> APIRouter:
    router = APIRouter(tags=["events"], responses=COMMON_ANSWERS)

    @router.get(
        "/events",
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "the event stream"},
        },
    )
    async def events(
        request: Request,
        last_event_id: Annotated[
            str | None, Header(alias="Last-Event-ID", description="the last event's id")
        ] = None,
        since: Annotated[
            str | None,
            Query(alias="last_event_id", pattern=CURSOR_PATTERN,
                  description="as Last-Event-ID, for a first connection"),
        ] = None,
    ) -> StreamingResponse:  # fmt: skip
        """Route transitions and transcript changes as they are written."""
        found = streams(request)
        given = last_event_id if last_event_id is not None else since
        cursor = _cursor(given, "Last-Event-ID" if last_event_id is not None else "last_event_id")
        if found.open >= found.limit:
            raise simple(503, "too_many_streams", f"{found.limit} event streams are open")
        if cursor is None:
            try:
                cursor = await newest(found.client, found.keys)
            except StoreUnavailableError as error:
                raise simple(503, "store_unavailable", error_text(error)) from None
        found.open += 1  # counted from here: the generator's `finally` gives it back
        return StreamingResponse(
            _follow(found, cursor), media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )  # fmt: skip

    return router


def _cursor(text: str | None, name: str) -> StreamCursor | None:
    if text is None or not text.strip():
        return None
    try:
        return StreamCursor.parse(text)
    except ValueError as error:
        raise header_field(name, text, str(error)) from None


async def _follow(streams: EventStreams, cursor: StreamCursor) -> AsyncIterator[str]:
    stopping = asyncio.ensure_future(streams.stopping.wait())
    reading: asyncio.Future[list[StreamEntry]] | None = None
    try:
        yield f"retry: 1000\nid: {cursor}\n\n"
        while not stopping.done():
            reading = asyncio.ensure_future(read_after(
                streams.client, streams.keys, cursor, count=BATCH, block_ms=streams.keepalive_ms,
            ))  # fmt: skip
            await asyncio.wait((reading, stopping), return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():  # the server stops: the client comes back with its id
                _abandon(reading)
                return
            try:
                entries = reading.result()
            except StoreUnavailableError as error:
                yield f"event: error\ndata: {json.dumps({'error': error_text(error)})}\n\n"
                return  # the client reconnects with its Last-Event-ID
            if not entries:
                yield ": keep-alive\n\n"
                continue
            for entry in entries:
                cursor = entry.cursor
                yield sse_message(entry)
    finally:  # the client went away, the server stops, or the stream ended
        stopping.cancel()
        if reading is not None and not reading.done():
            _abandon(reading)  # a read of nobody's must not outlive its stream
        streams.open -= 1


def _abandon(reading: asyncio.Future[list[StreamEntry]]) -> None:
    """Cancel a read nobody will wait for. A read failing as it is cancelled (the server
    closing Redis connections as it stops) ends with its error rather than cancelled, and
    an error nobody retrieves is logged with its traceback: it is retrieved here."""
    reading.cancel()
    reading.add_done_callback(_retrieve)


def _retrieve(reading: asyncio.Future[list[StreamEntry]]) -> None:
    if not reading.cancelled():
        reading.exception()


def sse_message(entry: StreamEntry) -> str:
    """One entry as a Server-Sent Events message (one `data:` line of compact JSON)."""
    if entry.event is None:
        name, data = "unreadable", {"stream": entry.stream, "event_id": entry.entry_id}
    else:
        name, data = entry.event.event, entry.event.model_dump(mode="json")
    payload: Any = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {entry.cursor}\nevent: {name}\ndata: {payload}\n\n"
