"""One write to the socket per answer, where uvicorn makes two.

uvicorn's httptools protocol writes an answer's status line and headers when the app
sends `http.response.start`, and its body when the app sends the body: two `send`
system calls, and with Nagle off (actors/api/server.py) two TCP segments, so the client
often wakes for the headers and again for the body. On this 2-core machine each send
on loopback cost 0.1 to 0.2 ms of CPU under load (bench/http_api.py, cProfile of the
API's thread), as much as the app's own work on a route command.

`CoalescingHttpTools` is that protocol with its transport wrapped: the writes made in
one turn of the event loop are joined and written once at the end of the turn
(`call_soon`). An app sends an answer's start and body in one turn unless it awaits
something between them, so each plain answer is one send; an event stream still goes
out chunk by chunk, each as soon as the loop turns. Closing flushes first; aborting
drops what is pending, as the socket's own abort drops its buffer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescingTransport(asyncio.Transport):
    """`inner`, its writes of one loop turn written as one (see the module)."""

    def __init__(self, inner: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._inner = inner
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Write what is pending now (the loop does at the end of the turn)."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        if not self._inner.is_closing():  # a connection lost meanwhile takes nothing more
            self._inner.write(data)

    def get_write_buffer_size(self) -> int:
        return self._inner.get_write_buffer_size() + sum(map(len, self._pending))

    def write_eof(self) -> None:
        self.flush()
        self._inner.write_eof()

    def close(self) -> None:
        self.flush()
        self._inner.close()

    def abort(self) -> None:
        self._pending.clear()
        self._inner.abort()

    # The rest is the inner transport's own.

    def can_write_eof(self) -> bool:
        return self._inner.can_write_eof()

    def is_closing(self) -> bool:
        return self._inner.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._inner.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._inner.pause_reading()

    def resume_reading(self) -> None:
        self._inner.resume_reading()

    def is_reading(self) -> bool:
        return self._inner.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._inner.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._inner.get_write_buffer_limits()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._inner.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._inner.get_protocol()


class CoalescingHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol, each loop turn's writes sent as one (the module)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn narrows BaseTransport to Transport
        super().connection_made(CoalescingTransport(transport, self.loop))


__all__ = ["CoalescingHttpTools", "CoalescingTransport"]
