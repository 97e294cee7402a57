"""`GET /events` before it streams: the cursor it resumes from, refusals in the API's
shape, one message per entry (tests/actors/api/test_api_up.py reads a live stream); the
socket the API is served on."""

from __future__ import annotations

import asyncio
import gc
import json
import socket

import pytest

from actors.api import events as events_module
from actors.api.events import sse_message
from actors.api.server import bind
from actors.engine.config_values import ApiAddress
from actors.errors import StoreUnavailableError
from actors.routes.models import RouteEvent
from actors.store.event_reads import StreamCursor, StreamEntry
from tests.actors.api.api_rigs import client_of, fake_backend
from tests.actors.conftest import unique_keys


@pytest.mark.parametrize(
    ("header", "value"),
    [("Last-Event-ID", "yesterday"), ("Last-Event-ID", "1-0"), ("Last-Event-ID", "1-0,x")],
)
def test_a_bad_last_event_id_is_422_naming_the_header(header: str, value: str) -> None:
    with client_of(fake_backend(unique_keys())) as client:
        answer = client.get("/events", headers={header: value})
    assert answer.status_code == 422
    first = answer.json()["errors"][0]
    assert (first["field"], first["location"], first["value"]) == (header, "header", value)


def test_one_stream_beyond_the_limit_is_503_and_none_is_opened() -> None:
    backend = fake_backend(unique_keys())
    backend.max_event_streams = 0
    with client_of(backend) as client:
        answer = client.get("/events")
        assert (answer.status_code, answer.json()["error"]) == (503, "too_many_streams")
        assert client.app.state.streams.open == 0  # type: ignore[attr-defined]  # FastAPI's app


def test_a_cursor_names_both_streams_and_moves_one_at_a_time() -> None:
    cursor = StreamCursor.parse("1733140800123-0,1733140799001-4")
    assert (cursor.routes, cursor.transcript) == ("1733140800123-0", "1733140799001-4")
    moved = cursor.moved("transcript", "1733140800200-0")
    assert str(moved) == "1733140800123-0,1733140800200-0"
    for bad in ["", "0-0", "0-0,", "a-0,0-0", "01-0,0-0", "0-0,0-0,0-0"]:
        with pytest.raises(ValueError, match="Redis stream ids"):
            StreamCursor.parse(bad)


def test_an_entry_is_one_message_with_the_cursor_as_its_id() -> None:
    event = RouteEvent.model_validate({
        "event_id": "5-0", "event": "route.transition", "route_id": "s-1", "cause": "start",
        "from_state": "none", "from_generation": 0, "state": "active", "generation": 1,
        "retry_ordinal": 0, "retry_max": 0, "reason": "line one\nline two",
        "at": "2026-11-29T12:00:00Z",
    })  # fmt: skip
    cursor = StreamCursor("5-0", "3-0")
    text = sse_message(StreamEntry("routes", "5-0", event, cursor))
    lines = text.split("\n")
    assert lines[:2] == ["id: 5-0,3-0", "event: route.transition"]
    assert lines[3:] == ["", ""]  # one data line (a newline in a field stays escaped)
    assert json.loads(lines[2].removeprefix("data: "))["reason"] == "line one\nline two"
    unreadable = sse_message(StreamEntry("transcript", "4-0", None, cursor))
    assert unreadable.split("\n")[1] == "event: unreadable"


def test_the_api_socket_is_tcp_with_nagle_off() -> None:
    """Found by bench/http_api.py: a socket made with protocol 0 is not one asyncio turns
    Nagle off for, and every answer waited ~40 ms for the client's delayed ACK."""
    listening = bind(ApiAddress("127.0.0.1", 0))
    try:
        assert listening.proto == socket.IPPROTO_TCP
        assert listening.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        listening.close()


def test_a_read_that_fails_as_its_stream_abandons_it_logs_no_unretrieved_error() -> None:
    """`up` stopping with a stream open: the read is cancelled while the server closes its
    Redis connections, so it ends with its error instead; that error must be retrieved
    (asyncio logs an unretrieved one with a traceback on `up`'s stderr)."""
    reported: list[dict[str, object]] = []

    waiting = asyncio.Event()

    async def failing_read() -> list[StreamEntry]:
        waiting.set()
        try:
            await asyncio.Event().wait()  # a blocking XREAD, never answered
        except asyncio.CancelledError:
            raise StoreUnavailableError("events read", "Connection closed by server.") from None
        return []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        reading = asyncio.ensure_future(failing_read())
        await waiting.wait()
        events_module._abandon(reading)
        await asyncio.wait([reading])
        assert reading.done()
        assert not reading.cancelled()  # it ended with its error (not read here)
        del reading
        gc.collect()

    asyncio.run(main())
    assert reported == []
