"""Rigs for the HTTP API's tests without Ray: the app on RouteService (the planner and the
store a route host runs) over fakeredis or the session's Redis, and a recording stand-in
that proves what a request did or did not touch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import fakeredis
import redis
from fakeredis.aioredis import FakeRedis
from fastapi.testclient import TestClient
from redis.asyncio import Redis as AsyncRedis

from actors.api import ApiBackend, Tokens, create_app
from actors.api.metrics import RequestMetrics
from actors.clock import Clock, SystemClock
from actors.engine.authorisers import ProfileEditAuthoriser, RecordedTaskAuthoriser
from actors.engine.notice_lifecycle import CancelOutcome
from actors.engine.notice_setup import route_notices
from actors.engine.profile_edits import ProfileEditor
from actors.engine.service import RouteService
from actors.engine.settings import EngineSettings
from actors.keys import KeySpace, valid_route_id
from actors.routes.models import AttemptRecord, RouteSnapshot
from actors.store.profile_store import ProfileStore
from actors.store.route_store import RouteStore

TOKEN = "test-token-0123456789abcdef"
OTHER_TOKEN = "other-token-0123456789abcdef"
PRINCIPALS = {TOKEN: "alice", OTHER_TOKEN: "bob"}


class ServiceRoute:
    """One route's handle on a RouteService: RouteHandle's methods, same arguments."""

    def __init__(self, routes: ServiceRoutes, route_id: str) -> None:
        self._routes = routes
        self.route_id = route_id

    def __getattr__(self, name: str) -> Callable[..., Any]:
        async def call(*args: Any, **options: Any) -> Any:
            service = self._routes.service()
            return await getattr(service, name)(self.route_id, *args, **options)

        return call

    async def snapshot(self) -> RouteSnapshot:
        return await self._routes.service().snapshot(self.route_id)

    async def history(self) -> list[AttemptRecord]:
        return await self._routes.service().history(self.route_id)

    async def cancel_transient_retry(
        self, task_id: str, principal: str | None = None
    ) -> CancelOutcome:
        # The service names the task before the session (the handle knows its session).
        service = self._routes.service()
        return await service.cancel_transient_retry(task_id, self.route_id, principal)


@dataclass
class ServiceRoutes:
    """Route handles on one RouteService, made in the app's event loop on first use (a
    redis.asyncio client belongs to the loop that made it)."""

    connect: Callable[[], AsyncRedis]
    keys: KeySpace
    clock: Clock = field(default_factory=SystemClock)
    notices_url: str | None = None
    """With a Redis URL, the service keeps transcript notices there (as a host does)."""
    _service: RouteService | None = None

    def service(self) -> RouteService:
        if self._service is None:
            store = RouteStore(self.connect(), clock=self.clock, keys=self.keys, owns_client=True)
            notices = None
            if self.notices_url is not None:
                settings = EngineSettings(key_prefix=self.keys.prefix)
                notices, _client = route_notices(self.notices_url, settings, store, self.clock)
            self._service = RouteService(store, self.clock, notices=notices)
        return self._service

    def route(self, route_id: str) -> ServiceRoute:
        return ServiceRoute(self, valid_route_id(route_id))


class StoreProfiles:
    """The profile store as RuntimeProfiles serves it: a store on a client of its own per
    call (any loop may call it), edits authorised by `authoriser` (None: the default)."""

    def __init__(
        self, connect: Callable[[], AsyncRedis], keys: KeySpace, clock: Clock,
        authoriser: ProfileEditAuthoriser | None = None,
    ) -> None:  # fmt: skip
        self._connect = connect
        self._keys = keys
        self._clock = clock
        self._authoriser = authoriser or RecordedTaskAuthoriser(_no_task)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        async def call(*args: Any, **options: Any) -> Any:
            store = ProfileStore(self._connect(), clock=self._clock, keys=self._keys,
                                 owns_client=True)  # fmt: skip
            async with store:
                editor = ProfileEditor(store, self._authoriser)
                return await getattr(editor, name)(*args, **options)

        return call


async def _no_task(_session_id: str) -> str | None:
    return None


def fake_backend(
    keys: KeySpace, clock: Clock | None = None, server: fakeredis.FakeServer | None = None,
    authoriser: ProfileEditAuthoriser | None = None,
) -> ApiBackend:  # fmt: skip
    """The API's backend on one fakeredis server (`server`, else a new one): route
    commands through RouteService, listings through the read helpers on a blocking
    client of the same server; profile edits authorised by `authoriser` (None: the
    default authoriser)."""
    server = server or fakeredis.FakeServer()

    def connect(_size: int = 1, _timeout_s: float = 5.0) -> AsyncRedis:
        return FakeRedis(server=server, decode_responses=True, encoding_errors="surrogateescape")

    routes = ServiceRoutes(connect, keys, clock or SystemClock())
    listing = fakeredis.FakeRedis(server=server, decode_responses=True)
    profiles = StoreProfiles(connect, keys, clock or SystemClock(), authoriser)
    return ApiBackend(routes=routes, keys=keys, listing=listing, connect=connect, profiles=profiles)


def redis_backend(url: str, keys: KeySpace, *, notices: bool = False) -> ApiBackend:
    """The same on a real Redis (the integration tier); with `notices`, routes started
    with a task id keep their transcript notices, as a route host's do."""

    def connect() -> AsyncRedis:
        return AsyncRedis.from_url(url, decode_responses=True)

    profiles = StoreProfiles(connect, keys, SystemClock())
    routes = ServiceRoutes(connect, keys, notices_url=url if notices else None)
    return ApiBackend.on_redis(routes, url, keys, profiles)


@contextmanager
def client_of(
    backend: ApiBackend,
    *,
    tokens: Tokens | None = None,
    metrics: RequestMetrics | None = None,
    clock: Clock | None = None,
) -> Iterator[TestClient]:
    app = create_app(backend, tokens=tokens, metrics=metrics, clock=clock)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@dataclass
class RecordedMetrics:
    seen: list[tuple[str, str, int]] = field(default_factory=list)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        assert seconds >= 0
        self.seen.append((route, method, status))


@dataclass
class Touched:
    """What a request reached: route handles made, route calls, Redis commands."""

    routes: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)


class RecordingRoute:
    """A route that records every call and answers a fixed snapshot."""

    def __init__(self, touched: Touched, route_id: str) -> None:
        self.touched = touched
        self.route_id = route_id

    def __getattr__(self, name: str) -> Callable[..., Any]:
        async def call(*args: Any, **options: Any) -> Any:
            self.touched.calls.append(name)
            snapshot = RouteSnapshot.absent(self.route_id)
            if name == "cancel_transient_retry":
                principal = options.get("principal", args[1] if len(args) > 1 else None)
                self.touched.calls.append(f"principal={principal}")
                return CancelOutcome(active=False, snapshot=snapshot)
            return [] if name == "history" else snapshot

        return call


class RecordingRoutes:
    def __init__(self, touched: Touched) -> None:
        self.touched = touched

    def route(self, route_id: str) -> RecordingRoute:
        self.touched.routes.append(route_id)
        return RecordingRoute(self.touched, route_id)


class RecordingRedis(redis.Redis):
    """A blocking client that records the commands sent to fakeredis."""

    def __init__(self, touched: Touched, server: fakeredis.FakeServer) -> None:
        self._touched = touched
        self._inner = fakeredis.FakeRedis(server=server, decode_responses=True)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self._touched.commands.append(str(args[0]))
        return self._inner.execute_command(*args, **options)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        self._touched.commands.append("PIPELINE")
        return self._inner.pipeline(transaction, shard_hint)

    def close(self) -> None:
        self._inner.close()


def recording_backend(keys: KeySpace) -> tuple[ApiBackend, Touched]:
    touched = Touched()
    server = fakeredis.FakeServer()

    def connect(_size: int = 1, _timeout_s: float = 5.0) -> AsyncRedis:
        touched.commands.append("CONNECT")
        return FakeRedis(server=server, decode_responses=True)

    backend = ApiBackend(
        routes=RecordingRoutes(touched), keys=keys, listing=RecordingRedis(touched, server),
        connect=connect,
    )  # fmt: skip
    return backend, touched


def aware(text: str) -> datetime:
    return datetime.fromisoformat(text)
