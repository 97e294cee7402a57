"""What the HTTP API stands on: route handles for commands, the store's read helpers for
listings, and its own Redis clients for circuits and event streams.

The API writes nothing itself. Every route command goes through a RouteHandle of the
runtime it serves (`recovery up`'s own, or any started or attached RecoveryRuntime), so a
request over HTTP is the same request a Python orchestrator sends; every profile edit
goes through the runtime's profile store (`runtime.profiles`), authorised as there.
Listings read Redis through actors/store's read helpers (sync_reads, transcript_reads,
CircuitStore's reads), on clients of their own with bounded pools: listings run in
FastAPI's worker threads on a blocking pool, the circuit reads and the event streams on
asyncio clients made in the app's event loop (a redis.asyncio client belongs to the loop
that made it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final, Protocol

import redis
from redis.asyncio import Redis as AsyncRedis

from actors.engine.notice_lifecycle import CancelOutcome
from actors.hosting.names import Owners
from actors.keys import KeySpace
from actors.routes.models import AttemptRecord, RouteSnapshot
from actors.routes.profiles import RouteProfile
from actors.store.installation import read_installation
from actors.store.pool import bounded_client
from actors.store.profile_codec import ProfilePage, StoredProfile
from actors.store.profile_store import ProfileInput
from catalogue import Classification, Evidence
from policy import TurnEvidence

if TYPE_CHECKING:
    from actors.hosting.runtime import RecoveryRuntime

TIMEOUT_S: Final = 5.0
LISTING_CONNECTIONS: Final = 8
CIRCUIT_CONNECTIONS: Final = 4
MAX_EVENT_STREAMS: Final = 32
"""Event streams (GET /events) served at once: each holds one Redis connection while it
blocks on XREAD; one more is refused with 503 rather than queued."""


class RouteApi(Protocol):
    """The route API the HTTP API drives: RouteHandle's (actors/hosting/handle.py)."""

    async def start(
        self, profile: RouteProfile | None = None, *, caller: str, invocation_id: str,
        provider_session_id: str | None = None, request_id: str | None = None,
        task_id: str | None = None, utility: bool = False,
        recovery_deadline: datetime | None = None, profile_id: str | None = None,
    ) -> RouteSnapshot: ...  # fmt: skip

    async def report_failure(
        self, expected_generation: int, evidence: Evidence | Classification,
        turn: TurnEvidence | None, *, caller: str, invocation_id: str,
        provider_session_id: str | None = None, attempt: int | None = None,
        request_id: str | None = None, utility: bool = False,
    ) -> RouteSnapshot: ...  # fmt: skip

    async def report_success(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot: ...

    async def retry_now(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot: ...

    async def skip_now(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot: ...

    async def cancel_wait(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot: ...

    async def stop(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot: ...

    async def resume(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot: ...

    async def start_fresh(
        self, expected_generation: int, profile: RouteProfile | None = None, *,
        request_id: str | None = None, recovery_deadline: datetime | None = None,
        profile_id: str | None = None,
    ) -> RouteSnapshot: ...  # fmt: skip

    async def close(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot: ...

    async def snapshot(self) -> RouteSnapshot: ...

    async def history(self) -> list[AttemptRecord]: ...

    async def cancel_transient_retry(
        self, task_id: str, principal: str | None = None
    ) -> CancelOutcome: ...


class ProfileApi(Protocol):
    """The profile store the HTTP API serves: RuntimeProfiles' (actors/hosting/profiles.py),
    every edit authorised for the principal first."""

    async def create(
        self, profile_id: str, document: ProfileInput, *, principal: str | None = None
    ) -> StoredProfile: ...

    async def update(
        self, profile_id: str, document: ProfileInput, *, expected_version: int,
        principal: str | None = None,
    ) -> StoredProfile: ...  # fmt: skip

    async def delete(
        self, profile_id: str, *, expected_version: int | None = None,
        principal: str | None = None,
    ) -> None: ...  # fmt: skip

    async def get(self, profile_id: str) -> StoredProfile: ...

    async def list(self, *, limit: int = ..., after: str | None = None) -> ProfilePage: ...


class Routes(Protocol):
    """Hands out route handles: a RecoveryRuntime is one."""

    def route(self, route_id: str) -> RouteApi: ...


@dataclass
class ApiBackend:
    """The API's view of one installation. `listing` is the blocking client the read
    helpers use (thread-safe, bounded); `connect(max_connections, timeout_s)` makes an
    asyncio client in the running loop (an event stream's client waits longer than its
    XREAD blocks); `circuit_owner` names the circuit host owning a resource."""

    routes: Routes
    keys: KeySpace
    listing: redis.Redis
    connect: Callable[[int, float], AsyncRedis]
    circuit_owner: Callable[[str], str | None] = lambda _resource_id: None
    max_event_streams: int = MAX_EVENT_STREAMS
    profiles: ProfileApi | None = None

    @classmethod
    def of_runtime(cls, runtime: RecoveryRuntime) -> ApiBackend:
        """The backend of a started (or attached) runtime: its handles, its Redis."""
        url = runtime.url
        return cls.on_redis(runtime, url, KeySpace(runtime.key_prefix), runtime.profiles)

    @classmethod
    def on_redis(
        cls, routes: Routes, url: str, keys: KeySpace, profiles: ProfileApi | None = None
    ) -> ApiBackend:
        listing = listing_client(url)
        return cls(
            routes=routes, keys=keys, listing=listing,
            connect=lambda size, timeout_s: bounded_client(
                url, max_connections=size, timeout_s=timeout_s
            ),
            circuit_owner=circuit_owners(listing, keys), profiles=profiles,
        )  # fmt: skip

    def close(self) -> None:
        self.listing.close()


def listing_client(url: str) -> redis.Redis:
    """A blocking, text-decoding client for the read helpers, on a bounded pool that
    FastAPI's worker threads share (one waits for a connection rather than opening more)."""
    pool = redis.BlockingConnectionPool.from_url(
        url, max_connections=LISTING_CONNECTIONS, timeout=TIMEOUT_S,
        socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S,
        decode_responses=True, encoding_errors="surrogateescape",
    )  # fmt: skip
    return redis.Redis(connection_pool=pool)


def circuit_owners(client: redis.Redis, keys: KeySpace) -> Callable[[str], str | None]:
    """The name of the circuit host owning a resource id, by the installation's record
    (None for every circuit when none is recorded or it runs no circuit hosts)."""
    record = read_installation(client, keys)
    names = () if record is None else record.circuit_host_names
    if not names:
        return lambda _resource_id: None
    owners = Owners(len(names), kind="circuit")
    return lambda resource_id: names[owners.index_of(resource_id)]
