"""The ASGI layer every request passes before routing: the bearer token, the body's size,
and the request's metrics.

A request without a valid token (when tokens are configured) is answered 401 here, before
any route is matched, any body read or any endpoint run: nothing is read for it. A body
of another media type than JSON is answered 415 (curl's `-d` alone sends a form); one
declared larger than `max_body` is answered 413 without reading it; one that turns out
larger while it streams in is cut off at the bound (the endpoint sees a broken body), so
no request holds more than `max_body` bytes. The principal of the token is put in the
request's state (`request.state.principal`; None without tokens).

A browser presents the web console's cookie instead of the header (actors/api/auth.py,
CONSOLE_COOKIE). A page request without a valid token is sent to the login form (303)
rather than answered 401; a state-changing request authenticated by the cookie alone must
carry `X-Requested-With` and, when it names an `Origin`, this app's own (403 otherwise):
no other site can make a logged-in browser act.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final
from urllib.parse import quote

from actors.api.auth import CSRF_HEADER, Tokens, bearer, cookie_token, is_open
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
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
FORM_PATHS: Final = frozenset({"/console/login", "/console/logout"})  # a browser's forms
LOGIN: Final = "/console/login"
CROSS_SITE: Final = Problem(
    error="cross_site",
    message="a request authenticated by the console's cookie must come from the console "
    "(X-Requested-With, same Origin)",
)


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
        path = str(scope.get("path", ""))
        method = str(scope.get("method", ""))
        if self.tokens.required and not is_open(path):
            token = bearer(headers.get(b"authorization"))
            by_cookie = token is None
            if by_cookie:
                token = cookie_token(headers.get(b"cookie"))
            principal = self.tokens.principal_of(token or "")
            if principal is None:
                await self._refuse(scope, send, path, method)
                return
            if by_cookie and method not in SAFE_METHODS and not _same_site(headers):
                await respond(send, 403, CROSS_SITE)
                return
            scope.setdefault("state", {})["principal"] = principal
        media = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        form = path in FORM_PATHS and media == b"application/x-www-form-urlencoded"
        if media and method in BODY_METHODS and not _json(media) and not form:
            await respond(send, 415, NOT_JSON)  # e.g. curl -d without a JSON Content-Type
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            problem = Problem(error="too_large", message=f"a body is at most {self.max_body} bytes")
            await respond(send, 413, problem)
            return
        await self.app(scope, self._bounded(receive), send)

    async def _refuse(self, scope: Scope, send: Send, path: str, method: str) -> None:
        """No valid token: a browser asking for a page goes to the login form, anything
        else is 401."""
        if method == "GET" and (path == "/" or path.startswith("/console")):
            query = scope.get("query_string", b"").decode("latin-1")
            wanted = path + (f"?{query}" if query else "")
            location = f"{LOGIN}?next={quote(wanted, safe='')}"
            await send({"type": "http.response.start", "status": 303,
                        "headers": [(b"location", location.encode()),
                                    (b"content-length", b"0")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b""})
            return
        await respond(send, 401, UNAUTHORISED, {"www-authenticate": "Bearer"})

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


def _same_site(headers: dict[bytes, bytes]) -> bool:
    """The custom header is there, and the Origin (when the browser names one) is this
    app's own host."""
    if not headers.get(CSRF_HEADER):
        return False
    origin = headers.get(b"origin")
    if origin is None:
        return True
    host = headers.get(b"host", b"")
    return origin.split(b"://", 1)[-1] == host


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
