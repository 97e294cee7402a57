"""The HTTP API as one FastAPI app (docs/CONTRACTS.md, HTTP API; README, "The HTTP API").

    app = create_app(ApiBackend.of_runtime(runtime), tokens=load_tokens(token, None))

`recovery up` serves it (actors/api/server.py); any process with a started or attached
RecoveryRuntime can. Paths are at the root, unversioned: `/routes…`, `/schedules`,
`/profiles…`, `/circuits`, `/sessions/{id}/…`, `/events`, `/classify`, `/explain`, `/policy/…`, and
`/openapi.json` with `/docs`. Every refusal has one shape (actors/api/problems.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from actors.api.auth import Tokens
from actors.api.backend import CIRCUIT_CONNECTIONS, TIMEOUT_S, ApiBackend
from actors.api.circuit_views import CircuitReads
from actors.api.console import console_router, login_router, mount_static
from actors.api.events import STREAM_TIMEOUT_S, EventStreams, events_router
from actors.api.fast_path import FastPath
from actors.api.guard import Guard, Receive, Scope, Send
from actors.api.listings import listing_router
from actors.api.metrics import NoMetrics, RequestMetrics
from actors.api.problems import COMMON_ANSWERS, ApiProblem, from_validation, simple
from actors.api.profile_endpoints import profile_router
from actors.api.route_endpoints import route_router
from actors.api.stateless import stateless_router
from actors.clock import Clock, SystemClock
from actors.errors import error_report

log = logging.getLogger(__name__)

VERSION: Final = "1"
STATUS_CODES: Final = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
DESCRIPTION: Final = (
    "The provider-recovery runtime over HTTP: the route API an orchestrator drives, "
    "listings of routes, schedules, circuits and notices, an event stream, and the "
    "catalogue and policy on their own. With tokens configured, every path but "
    "/openapi.json and /docs needs `Authorization: Bearer <token>`. Every refusal is a "
    "Problem: `error` (a stable code), `message`, `errors` (one per bad field: `field`, "
    "`location`, `message`, `value`) and, when a route's fence refused, `snapshot`."
)


def create_app(
    backend: ApiBackend,
    *,
    tokens: Tokens | None = None,
    metrics: RequestMetrics | None = None,
    clock: Clock | None = None,
    fast_path: bool = True,
) -> FastAPI:
    """The API on `backend` (its route handles and Redis). `tokens`: who may call it
    (none: anyone who can reach it, for loopback only); `metrics`: where request
    figures go (none: nowhere); `clock`: "now" for the stateless endpoints;
    `fast_path`: whether the hot route commands skip FastAPI's machinery (the answers
    are the same; False serves every request through FastAPI, the reference the fast
    path is tested against)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Asyncio clients belong to the loop that serves the app: made here, in it.
        app.state.circuits = CircuitReads(
            backend.connect(CIRCUIT_CONNECTIONS, TIMEOUT_S), backend.keys, backend.circuit_owner
        )
        blocking = backend.connect(backend.max_event_streams, STREAM_TIMEOUT_S)
        app.state.streams = EventStreams(blocking, backend.keys, backend.max_event_streams)
        try:
            yield
        finally:
            await app.state.circuits.aclose()
            await app.state.streams.aclose()

    app = RecoveryApp(
        title="provider-recovery", version=VERSION, description=DESCRIPTION,
        lifespan=lifespan, redoc_url=None, swagger_ui_oauth2_redirect_url=None,
        responses=COMMON_ANSWERS,
    )  # fmt: skip
    app.state.backend = backend

    def found(request: Request) -> ApiBackend:
        chosen: ApiBackend = request.app.state.backend
        return chosen

    for router in (
        route_router(found),
        profile_router(found),
        listing_router(found, lambda request: request.app.state.circuits),
        events_router(lambda request: request.app.state.streams),
        stateless_router(clock or SystemClock()),
        login_router(tokens or Tokens()),
        console_router(found, lambda request: request.app.state.circuits),
    ):
        _include(app, router)
    mount_static(app)
    _answer_problems(app)
    admitting = tokens or Tokens()
    measuring = metrics or NoMetrics()
    app.add_middleware(Guard, tokens=admitting, metrics=measuring)
    if fast_path:
        app.fast_path = FastPath(app.through_fastapi, tokens=admitting, metrics=measuring)
    return app


class RecoveryApp(FastAPI):
    """The FastAPI app with its fast path in front of everything, FastAPI's and
    Starlette's own per-request layers too (~30 µs of CPU a request): the hot route
    commands skip them, and everything else, the fast path's refusals included, goes
    through them to the Guard and the app (actors/api/fast_path.py)."""

    fast_path: FastPath | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.fast_path is not None and scope["type"] == "http":
            scope["app"] = self  # as Starlette sets it: the handlers and the backend
            await self.fast_path(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def through_fastapi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The request served by FastAPI's own machinery (the Guard, then the app)."""
        await super().__call__(scope, receive, send)


def _include(app: FastAPI, router: APIRouter) -> None:
    """The router's endpoints as the app's own routes. FastAPI (0.16x) keeps an included
    router as a branch that every request walks twice (to match, then to dispatch),
    re-checking each router's version on the way: ~60 µs of CPU a request in a tight
    loop, a fifth of the app's own. The routes carry their tags and answers already
    (COMMON_ANSWERS: their routers are made with it); the routers have no lifespan or
    startup handlers for include_router to merge. The OpenAPI document is the same."""
    app.router.routes.extend(router.routes)


def _answer_problems(app: FastAPI) -> None:
    """Every refusal in the one shape."""

    @app.exception_handler(ApiProblem)
    async def problem(_request: Request, error: ApiProblem) -> JSONResponse:
        return _json(error)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        return _json(from_validation(error))

    @app.exception_handler(HTTPException)
    async def http(_request: Request, error: HTTPException) -> JSONResponse:
        code = STATUS_CODES.get(error.status_code, "http_error")
        return _json(simple(error.status_code, code, str(error.detail), error.headers))

    @app.exception_handler(RecursionError)
    async def too_deep(_request: Request, _error: RecursionError) -> JSONResponse:
        return _json(simple(422, "invalid_request", "the body is nested too deeply"))

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, error: Exception) -> JSONResponse:
        log.error("the HTTP API failed on a request: %s", error_report(error))
        return _json(simple(500, "internal", "the server failed; its log says why"))


def _json(problem: ApiProblem) -> JSONResponse:
    body = problem.problem.model_dump(mode="json")
    return JSONResponse(body, status_code=problem.status, headers=problem.headers)
