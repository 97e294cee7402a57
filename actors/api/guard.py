"""The ASGI layer every request passes before routing: the bearer token, the body's size,
and the request's metrics.

A request without a valid token (when tokens are configured) is answered 401 here, before
any route is matched, any body read or any endpoint run: nothing is read for it. A body
of another media type than JSON is answered 415 (curl's `-d` alone sends a form); one
declared larger than `max_body` is answered 413 without reading it; one that turns out
larger while it streams in is cut off at the bound (the endpoint sees a broken body), so
no request holds more than `max_body` bytes. The principal of the token is put in the
request's state (`request.state.principal`; None without tokens).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from actors.api.auth import OPEN_PATHS, Tokens, bearer
from actors.api.metrics import UNMATCHED, RequestMetrics
from actors.api.problems import Problem

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY: Final = 1 << 20
UNAUTHORISED: Final = Problem(
    error="unauthorised", message="a valid bearer token is required (Authorization: Bearer …)"
)


NOT_JSON: Final = Problem(
    error="unsupported_media_type", message="send the body as JSON (Content-Type: application/json)"
)
BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})


def _json(media: bytes) -> bool:
    return media == b"application/json" or media.endswith(b"+json")


class BodyTooLargeError(Exception):
    """The body streamed in beyond the bound."""


class Guard:
    """Wraps the app: authentication, the body bound, metrics (see the module)."""

    def __init__(
        self, app: ASGIApp, *, tokens: Tokens, metrics: RequestMetrics, max_body: int = MAX_BODY
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.metrics = metrics
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self._guarded(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or UNMATCHED
            method = str(scope.get("method", ""))
            self.metrics.observe(template, method, status[0], time.perf_counter() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(_headers(scope))
        if self.tokens.required and scope.get("path") not in OPEN_PATHS:
            principal = self.tokens.principal_of(bearer(headers.get(b"authorization")) or "")
            if principal is None:
                await respond(send, 401, UNAUTHORISED, {"www-authenticate": "Bearer"})
                return
            scope.setdefault("state", {})["principal"] = principal
        media = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if media and scope.get("method") in BODY_METHODS and not _json(media):
            await respond(send, 415, NOT_JSON)  # e.g. curl -d without a JSON Content-Type
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            problem = Problem(error="too_large", message=f"a body is at most {self.max_body} bytes")
            await respond(send, 413, problem)
            return
        await self.app(scope, self._bounded(receive), send)

    def _bounded(self, receive: Receive) -> Receive:
        seen = [0]

        async def bounded() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > self.max_body:
                    raise BodyTooLargeError(f"a body is at most {self.max_body} bytes")
            return message

        return bounded


def _headers(scope: Scope) -> list[tuple[bytes, bytes]]:
    return [(name.lower(), value) for name, value in scope.get("headers", [])]


async def respond(
    send: Send, status: int, problem: Problem, headers: dict[str, str] | None = None
) -> None:
    """An error answer in the API's shape, straight on the ASGI channel."""
    body = json.dumps(problem.model_dump(mode="json"), separators=(",", ":")).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(name.encode(), value.encode()) for name, value in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
