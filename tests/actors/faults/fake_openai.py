"""A fake OpenAI-compatible provider that replays fault scenarios over real HTTP.

`POST /v1/chat/completions` with a JSON body naming the `model`, and `Authorization:
Bearer <account>`: the account label stands in for a key, so one server plays several
accounts of one provider. What each call gets is decided by the behaviour registered for
its (account, model): a function of the call (its index among that pair's calls and the
seconds since the server started) returning an `Answer`, which is a status with headers
and an OpenAI-shaped error body, a success, or a connection reset before any response.
Every call is recorded (`calls`), in arrival order, on the server's monotonic clock.

The error bodies are OpenAI's documented shapes (`{"error": {"message", "type", "param",
"code"}}`) with messages as the API prints them. One request per connection (`Connection:
close`); a reset is a TCP RST (SO_LINGER 0), so the client sees it before any byte.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

MAX_HEAD_BYTES: Final = 16_384
MAX_BODY_BYTES: Final = 1_048_576
REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True, slots=True)
class Answer:
    """What one call gets: `status` with `headers` and `body`, or a reset (no response)."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] | None = None
    reset: bool = False

    @property
    def kind(self) -> str:
        return "reset" if self.reset else str(self.status)


@dataclass(frozen=True, slots=True)
class Call:
    """One call as the server saw it."""

    account: str
    model: str
    index: int  # among this (account, model)'s calls, from 0
    at: float  # seconds since the server started
    answer: str = ""  # Answer.kind, once decided


Behaviour = Callable[[Call], Answer]


def error(
    status: int,
    message: str,
    kind: str,
    code: str | None = None,
    *,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """An OpenAI-shaped error answer."""
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return Answer(status=status, headers=dict(headers or {}), body=body)


def completion(model: str) -> Answer:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
    }
    return Answer(body=body)


RATE_LIMITED: Final = error(
    429, "Rate limit reached for requests", "requests", "rate_limit_exceeded"
)
OVERLOADED: Final = error(503, "The server is overloaded or not ready yet.", "server_error")
SERVER_ERROR: Final = error(
    500,
    "The server had an error while processing your request. Sorry about that!",
    "server_error",
)
CONTEXT_TOO_LONG: Final = error(
    400,
    "This model's maximum context length is 128000 tokens. However, your messages "
    "resulted in 131072 tokens. Please reduce the length of the messages.",
    "invalid_request_error",
    "context_length_exceeded",
    param="messages",
)
RESET: Final = Answer(reset=True)


def quota_exceeded(retry_after_s: int) -> Answer:
    return error(
        429,
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
        "insufficient_quota",
        headers={"retry-after": str(retry_after_s)},
    )


class FakeOpenAI:
    """The server; `behaviours[(account, model)]` decides each call (unknown: a 404)."""

    def __init__(self, behaviours: Mapping[tuple[str, str], Behaviour]) -> None:
        self._behaviours = dict(behaviours)
        self._counts: dict[tuple[str, str], int] = {}
        self._server: asyncio.Server | None = None
        self.began = time.monotonic()
        self.calls: list[Call] = []

    async def start(self) -> str:
        """Listen on a free loopback port; the base URL."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.began = time.monotonic()
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            account, model = await _read_request(reader)
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            await _respond(writer, error(400, "malformed request", "invalid_request_error"))
            return
        key = (account, model)
        index = self._counts.get(key, 0)
        self._counts[key] = index + 1
        call = Call(account, model, index, self.elapsed())
        behaviour = self._behaviours.get(key)
        answer = (
            behaviour(call)
            if behaviour
            else error(
                404,
                f"The model `{model}` does not exist",
                "invalid_request_error",
                "model_not_found",
            )
        )
        self.calls.append(Call(account, model, index, call.at, answer.kind))
        if answer.reset:
            _reset(writer)
            return
        await _respond(writer, answer if answer.body else completion(model))


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise ValueError("head too long")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    if not 0 <= length <= MAX_BODY_BYTES:
        raise ValueError("bad length")
    body = json.loads(await reader.readexactly(length) or b"{}")
    account = headers.get("authorization", "").removeprefix("Bearer ").strip()
    return account, str(body.get("model", ""))


async def _respond(writer: asyncio.StreamWriter, answer: Answer) -> None:
    payload = json.dumps(answer.body).encode()
    head = [
        f"HTTP/1.1 {answer.status} {REASONS.get(answer.status, 'Error')}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        "Connection: close",
    ]
    head += [f"{name}: {value}" for name, value in answer.headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
    try:
        await writer.drain()
    finally:
        writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
