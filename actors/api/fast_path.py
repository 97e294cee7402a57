"""The route commands an orchestrator sends on every turn, answered without FastAPI's
per-request machinery.

`POST /routes/{id}/failure`, `/success` and `/actions/{action}` are what an orchestrator
sends in its hot loop. FastAPI spends ~230 µs of CPU on each (middleware layers, routing,
dependency solving), several times what the request itself needs. `FastPath` sits in
front of FastAPI itself (actors/api/app.RecoveryApp: before its and Starlette's own
per-request layers, the Guard and the app) and takes such a request only when it is
plainly well formed, checking it as they would:

- the bearer token of the `Authorization` header (or no token configured), a body sent
  as `application/json` with a `Content-Length` within the Guard's bound, each of those
  headers and `Idempotency-Key` given at most once, the key and the route id of their
  patterns;
- the body's JSON validated by the endpoint's own model, and the command made by the
  endpoint's own function (actors/api/route_endpoints.py).

Then it sends the command and answers exactly what the endpoint answers: the same
Response for the snapshot, and a refusal of the command rendered by the app's own
exception handler. Anything else (no token, a cookie, another media type, a body that
does not parse or validate, an unknown action, any other path or method) goes to the
Guard and the app unchanged, with the body already read played back to them, so every
refusal is the app's own. Nothing is sent to a route before the request is known good,
so a request handed on was never applied.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from actors.api.auth import Tokens, bearer
from actors.api.backend import RouteApi
from actors.api.guard import MAX_BODY, ASGIApp, Message, Receive, Scope, Send
from actors.api.metrics import RequestMetrics
from actors.api.models import ActionRequest, FailureRequest, GenerationRequest, action_names
from actors.api.problems import ApiProblem
from actors.api.route_endpoints import (
    act_on,
    answer,
    as_json,
    report_failure,
    report_success,
    route_of,
)
from actors.keys import REQUEST_ID_PATTERN, ROUTE_ID_PATTERN
from actors.routes.models import RouteSnapshot

_ROUTE_ID: Final = re.compile(ROUTE_ID_PATTERN)
_REQUEST_ID: Final = re.compile(REQUEST_ID_PATTERN)
_PREFIX: Final = "/routes/"
# The headers the decision reads; one given twice is left to the app (which reads the
# first of some and the last of others).
_READ: Final = frozenset({
    b"authorization", b"content-type", b"content-length", b"idempotency-key",
    b"transfer-encoding",
})  # fmt: skip
# Actions with a body of their own checks (a profile to parse) stay with the app.
_FAST_ACTIONS: Final = frozenset(action_names()) - {"start-fresh"}

Command = Callable[[Any, Any, "str | None"], Awaitable[RouteSnapshot]]


@dataclass(frozen=True, slots=True)
class FastCommand:
    """A command the fast path serves: the metrics' route template, the body's model,
    and the endpoint's own function making the call."""

    template: str
    body: type[BaseModel]
    call: Command


def _action(action: str) -> Command:
    def call(route: Any, body: Any, key: str | None) -> Awaitable[RouteSnapshot]:
        return act_on(route, action, body, key)

    return call


_BY_LAST_PART: Final[dict[str, FastCommand]] = {
    "failure": FastCommand("/routes/{route_id}/failure", FailureRequest, report_failure),
    "success": FastCommand("/routes/{route_id}/success", GenerationRequest, report_success),
}
_ACTIONS: Final[dict[str, FastCommand]] = {
    name: FastCommand("/routes/{route_id}/actions/{action}", ActionRequest, _action(name))
    for name in _FAST_ACTIONS
}


def command_of(path: str) -> tuple[FastCommand, str] | None:
    """The command of a path the fast path serves, with its route id; None for any
    other path (the app decides)."""
    if not path.startswith(_PREFIX):
        return None
    parts = path[len(_PREFIX) :].split("/")
    if len(parts) == 2:
        found = _BY_LAST_PART.get(parts[1])
    elif len(parts) == 3 and parts[1] == "actions":
        found = _ACTIONS.get(parts[2])
    else:
        return None
    if found is None or not _ROUTE_ID.fullmatch(parts[0]):
        return None
    return found, parts[0]


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request the Guard would let through as it is, with its `Idempotency-Key`."""

    key: str | None


@dataclass(frozen=True, slots=True)
class Prepared:
    """A well-formed command, its call made but not yet sent."""

    route: RouteApi
    call: Awaitable[RouteSnapshot]


class FastPath:
    """Serves the hot route commands before the Guard and the app (see the module);
    everything else, and anything doubtful, goes to `app`."""

    def __init__(
        self, app: ASGIApp, *, tokens: Tokens, metrics: RequestMetrics, max_body: int = MAX_BODY
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.metrics = metrics
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        found = _candidate(scope)
        admitted = self._admitted(scope) if found is not None else None
        if found is None or admitted is None:
            await self.app(scope, receive, send)  # nothing read: the Guard decides
            return
        command, route_id = found
        read, raw = await _read_body(receive, self.max_body)
        prepared = _prepared(scope, raw, command, route_id, admitted.key)
        if prepared is None:
            await self.app(scope, _replayed(read, receive), send)
            return
        status = 500  # what the app's server error handler answers to an exception
        try:
            try:
                response = await _answered(scope, receive, prepared)
            except Exception as error:
                # Answered as the app's server error middleware answers (its handler of
                # Exception), then raised for the server to log: the fast path sits in
                # front of that middleware.
                answer = await _server_error(scope, receive, error)
                await answer(scope, receive, send)
                raise
            status = response.status_code
            await response(scope, receive, send)
        finally:
            seconds = time.perf_counter() - started
            self.metrics.observe(command.template, "POST", status, seconds)

    def _admitted(self, scope: Scope) -> Admitted | None:
        """The request as the Guard would let it through (a valid bearer token when
        tokens are required, a JSON body of a declared size within the bound) with a
        valid `Idempotency-Key` or none; None otherwise (the Guard and the app decide)."""
        headers = _read_headers(scope.get("headers", ()))
        if headers is None or b"transfer-encoding" in headers:
            return None
        if self.tokens.required:
            token = bearer(headers.get(b"authorization"))
            if token is None or self.tokens.principal_of(token) is None:
                return None
        if headers.get(b"content-type", b"").strip().lower() != b"application/json":
            return None
        declared = headers.get(b"content-length", b"")
        if not declared.isdigit() or int(declared) > self.max_body:
            return None
        key = headers.get(b"idempotency-key")
        if key is None:
            return Admitted(None)
        text = key.decode("latin-1")  # as Starlette decodes header values
        return Admitted(text) if _REQUEST_ID.fullmatch(text) else None


def _prepared(
    scope: Scope, raw: bytes | None, command: FastCommand, route_id: str, key: str | None
) -> Prepared | None:
    """The command's call when the body came whole, is the endpoint's model and the
    endpoint's function takes it; None otherwise (nothing was sent)."""
    body = None if raw is None else _parsed(raw, command.body)
    if body is None:
        return None
    try:
        route = route_of(scope["app"].state.backend, route_id)
        return Prepared(route, command.call(route, body, key))
    except ApiProblem:
        return None  # the app refuses it in its own words


async def _answered(scope: Scope, receive: Receive, prepared: Prepared) -> Response:
    """The endpoint's answer to the sent command: the snapshot, or the app's own
    handler's answer to its refusal. An exception no handler takes is raised (the app's
    server error middleware answers it, as it does the endpoint's)."""
    try:
        return as_json(await answer(prepared.route, prepared.call))
    except Exception as error:
        handled = await _handled(scope, receive, error)
        if handled is None:
            raise
        return handled


async def _server_error(scope: Scope, receive: Receive, error: Exception) -> Response:
    """The app's answer to an exception none of its handlers takes: its handler of
    Exception (actors/api/app.py registers one; its server error middleware calls it)."""
    handler = scope["app"].exception_handlers[Exception]
    answered: Response = await handler(Request(scope, receive), error)
    return answered


def _candidate(scope: Scope) -> tuple[FastCommand, str] | None:
    if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("root_path"):
        return None
    return command_of(str(scope.get("path", "")))


def _read_headers(raw: Sequence[tuple[bytes, bytes]]) -> dict[bytes, bytes] | None:
    """The headers the fast path reads, by lowercase name; None when one is given twice."""
    headers: dict[bytes, bytes] = {}
    for name, value in raw:
        lowered = name.lower()
        if lowered in _READ:
            if lowered in headers:
                return None
            headers[lowered] = value
    return headers


async def _read_body(receive: Receive, bound: int) -> tuple[list[Message], bytes | None]:
    """The messages read, and the body when it came whole within `bound` bytes (None on a
    disconnect or beyond the bound: the Guard and the app answer those as they replay)."""
    read: list[Message] = []
    size = 0
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            return read, None
        size += len(message.get("body", b""))
        if size > bound:
            return read, None
        if not message.get("more_body", False):
            return read, b"".join(part.get("body", b"") for part in read)


def _parsed(body: bytes, model: type[BaseModel]) -> BaseModel | None:
    """The body as the endpoint's model, parsed as FastAPI parses it (json.loads, then the
    model in Python mode); None when it does not parse or validate."""
    try:
        # from_attributes as FastAPI validates bodies (the same for JSON's plain values)
        return model.model_validate(json.loads(body), from_attributes=True)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, ValidationError
        return None


def _replayed(read: list[Message], receive: Receive) -> Receive:
    """`receive` with the messages already read played back first."""
    pending = list(read)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


async def _handled(scope: Scope, receive: Receive, error: Exception) -> Response | None:
    """The app's answer to an exception of a command, by its own handlers as its
    exception middleware picks them (the class's nearest); None for the ones left to the
    server error middleware (a plain Exception: 500)."""
    handlers: dict[Any, Any] = scope["app"].exception_handlers
    for kind in type(error).__mro__:
        if kind is Exception:
            return None
        if kind in handlers:
            response: Response = await handlers[kind](Request(scope, receive), error)
            return response
    return None


__all__ = ["FastCommand", "FastPath", "command_of"]
