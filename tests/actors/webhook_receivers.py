"""Real HTTP receivers on loopback for webhook dispatcher tests: each records every request
it read (headers and body) and answers as its test scripts it, one behaviour per request."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

Behaviour = Literal["ok", "not_now", "server_error", "hang", "reset"]


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """What the handler answers, request by request (the last behaviour repeats), what it
    read, and the event a hanging answer waits on (set when the test ends)."""

    behaviours: list[Behaviour]
    retry_after: str | None = None
    answer_body: bytes = b"ok"
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def next_behaviour(self) -> Behaviour:
        index = min(len(self.received) - 1, len(self.behaviours) - 1)
        return self.behaviours[index]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            receiver.received.append(Received(dict(self.headers.items()), body))
            match receiver.next_behaviour():
                case "ok":
                    self._answer(200)
                case "not_now":
                    self._answer(503, retry_after=receiver.retry_after)
                case "server_error":
                    self._answer(500)
                case "hang":  # read, then never answer while the test runs
                    receiver.release.wait(30)
                case "reset":  # read, then drop the connection with a reset
                    linger = struct.pack("ii", 1, 0)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                    self.connection.close()

        def _answer(self, status: int, *, retry_after: str | None = None) -> None:
            self.send_response(status)
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.send_header("Content-Length", str(len(receiver.answer_body)))
            self.end_headers()
            self.wfile.write(receiver.answer_body)

    return Handler


@contextmanager
def receiving(*behaviours: Behaviour, **options: object) -> Iterator[Receiver]:
    """A receiver on a free loopback port, running until the block ends."""
    receiver = Receiver(list(behaviours or ("ok",)), **options)  # type: ignore[arg-type]  # Receiver's own fields
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/recovery?team=a"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on (a port bound, then released)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}/hooks"
