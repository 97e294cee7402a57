"""Serving the HTTP API from a thread: what `recovery up` runs beside its runtime.

    listening = bind(address)                    # before anything starts
    server = ApiServer(app, listening, address).start()  # serving once it returns
    ...
    server.stop()

The socket is bound first, so a port in use fails `up` before the runtime starts, and
port 0 picks a free one (`server.url` names it). uvicorn runs the app in a thread with
its own event loop (its signal handling stays with `up`'s main thread); `start()`
returns once uvicorn has started serving on the socket, the moment `up` prints `ready`.
`stop()` stops accepting, lets requests in flight finish for `GRACE_S` (an event stream
is ended then) and runs the app's shutdown.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any, Final, Self

import uvicorn

from actors.api.coalescing import CoalescingHttpTools
from actors.engine.config_values import ApiAddress

GRACE_S: Final = 3
START_TIMEOUT_S: Final = 30.0


def bind(address: ApiAddress) -> socket.socket:
    """A listening TCP socket on `address`; OSError (in use, not an address of this
    machine) as the system says it."""
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets
    # it sees are TCP, and with Nagle on, an answer's headers and body (two writes) wait
    # for the client's delayed ACK, ~40 ms a request.
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        listening.bind((address.host, address.port))
        listening.listen(2048)
    except OSError:
        listening.close()
        raise
    listening.setblocking(False)
    return listening


class _Server(uvicorn.Server):
    """uvicorn's server, telling a waiting thread once it serves."""

    def __init__(
        self, config: uvicorn.Config, serving: threading.Event, stopping: Callable[[], None]
    ) -> None:
        super().__init__(config)
        self._serving = serving
        self._stopping = stopping

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self._serving.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._stopping()  # long answers (event streams) end now, not at the grace's end
        await super().shutdown(sockets)


class ApiServer:
    """The app served on `listening` from a thread of its own (see the module)."""

    def __init__(
        self,
        app: Any,
        listening: socket.socket,
        address: ApiAddress,
        *,
        stopping: Callable[[], None] = lambda: None,
    ) -> None:
        """`stopping` runs in the server's loop when it stops, before it waits for the
        requests in flight (the app's event streams end there)."""
        self.address = address
        self.port = int(listening.getsockname()[1])
        self._socket = listening
        self._serving = threading.Event()
        # httptools: requests parsed and answers framed in C; with h11 (pure Python) that
        # took ~0.5 ms of CPU a request on this machine (README, bench/http_api.py). Each
        # answer in one write, not two (actors/api/coalescing.py). uvloop: the event loop
        # and its sockets in C, ~10 % less of the server's CPU a request than asyncio's.
        # No proxy headers: nothing reads a client's address, and their middleware would
        # wrap every request.
        config = uvicorn.Config(
            app, http=CoalescingHttpTools, loop="uvloop", log_level="warning", access_log=False,
            timeout_graceful_shutdown=GRACE_S, lifespan="on", server_header=False,
            proxy_headers=False,
        )  # fmt: skip
        self._server = _Server(config, self._serving, stopping)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="recovery-api", daemon=True)

    @property
    def url(self) -> str:
        """The API's base URL, with the port it listens on."""
        return self.address.url(self.port)

    def start(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Serve; returns once uvicorn serves on the socket. RuntimeError when it could
        not start (its cause attached)."""
        self._thread.start()
        self._serving.wait(timeout)
        if not self._server.started:
            self.stop()
            raise RuntimeError("the HTTP API did not start") from self._failure
        return self

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except BaseException as error:  # SystemExit from a failed lifespan too
            self._failure = error
        finally:
            self._serving.set()  # a waiting start() learns of a failure at once

    def stop(self, timeout: float = GRACE_S + 10.0) -> None:
        """Stop serving (requests in flight get `GRACE_S`) and wait for the thread."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._socket.close()
