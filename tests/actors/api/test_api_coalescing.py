"""Each answer in one write (actors/api/coalescing.py): the writes of one loop turn reach
the socket's transport joined, in order; closing sends what is pending first, aborting
drops it; a connection already closing takes nothing more. And a real server answers
through it, keep-alive and streamed answers alike."""

from __future__ import annotations

import asyncio
import http.client
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from actors.api.coalescing import CoalescingTransport
from actors.api.server import ApiServer, bind
from actors.engine.config_values import ApiAddress


class RecordingTransport(asyncio.Transport):
    """A socket's transport that records what is written to it and what is done to it."""

    def __init__(self) -> None:
        super().__init__()
        self.done: list[Any] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.done.append(bytes(data))

    def close(self) -> None:
        self.closing = True
        self.done.append("close")

    def abort(self) -> None:
        self.closing = True
        self.done.append("abort")

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 3


async def _turn() -> None:
    """Let the loop run what is scheduled now (the flush comes at the end of a turn)."""
    await asyncio.sleep(0)


def run_with(steps: Any) -> list[Any]:
    inner = RecordingTransport()

    async def run() -> None:
        await steps(CoalescingTransport(inner, asyncio.get_running_loop()))

    asyncio.run(run())
    return inner.done


def test_the_writes_of_one_turn_are_written_as_one_in_order() -> None:
    async def steps(transport: CoalescingTransport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(memoryview(b"body"))
        transport.write(b"")
        assert transport.get_write_buffer_size() == 3 + 23
        await _turn()
        transport.writelines([b"next ", b"turn"])
        await _turn()

    assert run_with(steps) == [b"HTTP/1.1 200 OK\r\n\r\nbody", b"next turn"]


def test_closing_sends_what_is_pending_first_and_aborting_drops_it() -> None:
    async def closed(transport: CoalescingTransport) -> None:
        transport.write(b"last words")
        transport.close()
        await _turn()  # the scheduled flush finds nothing left

    async def aborted(transport: CoalescingTransport) -> None:
        transport.write(b"never sent")
        transport.abort()
        await _turn()

    assert run_with(closed) == [b"last words", "close"]
    assert run_with(aborted) == ["abort"]


def test_a_connection_closing_meanwhile_takes_nothing_more() -> None:
    inner = RecordingTransport()

    async def run() -> None:
        transport = CoalescingTransport(inner, asyncio.get_running_loop())
        transport.write(b"too late")
        inner.closing = True  # the peer went away before the turn ended
        await _turn()

    asyncio.run(run())
    assert inner.done == []


def test_a_served_app_answers_in_turn_on_one_connection_streams_included() -> None:
    app = FastAPI()

    @app.get("/plain")
    def plain() -> dict[str, str]:
        return {"answer": "plain"}

    @app.get("/stream")
    def stream() -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for part in (b"one ", b"two ", b"three"):
                yield part
                await asyncio.sleep(0)

        return StreamingResponse(parts(), media_type="text/plain")

    address = ApiAddress("127.0.0.1", 0)
    server = ApiServer(app, bind(address), address).start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        seen = []
        for path in ("/plain", "/stream", "/plain"):
            connection.request("GET", path)
            answer = connection.getresponse()
            seen.append((answer.status, answer.read()))
        connection.close()
    finally:
        server.stop()
    assert seen == [
        (200, b'{"answer":"plain"}'), (200, b"one two three"), (200, b'{"answer":"plain"}'),
    ]  # fmt: skip
