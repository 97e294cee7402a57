"""Route-store backends for tests: fakeredis[lua] (unit tier) and the session's real Redis
(integration tier). Every test gets its own key prefix, so tests never see each other's
keys, and the real Redis is cleaned of that prefix afterwards."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest
import redis
from fakeredis.aioredis import FakeRedis
from redis.asyncio import Redis

from actors.clock import ManualClock
from actors.jobs.worker_engine import close_engines
from actors.keys import KeySpace
from actors.store.route_store import RouteStore
from tests.actors.route_builders import T0


@dataclass
class Backend:
    """Opens stores and raw clients on one Redis (real or fake) inside the running loop."""

    name: str
    keys: KeySpace
    clock: ManualClock
    url: str | None = None
    fake_server: fakeredis.FakeServer | None = None

    def raw(self) -> Redis:
        """A plain client, as `redis-cli` would see the data."""
        if self.url is not None:
            return Redis.from_url(self.url, decode_responses=True)
        return FakeRedis(
            server=self.fake_server, decode_responses=True, encoding_errors="surrogateescape"
        )

    @asynccontextmanager
    async def store(self, *, events_maxlen: int = 1000) -> AsyncIterator[RouteStore]:
        if self.url is not None:
            store = RouteStore.connect(
                self.url, clock=self.clock, keys=self.keys, events_maxlen=events_maxlen
            )
        else:
            store = RouteStore(
                self.raw(), clock=self.clock, keys=self.keys, events_maxlen=events_maxlen,
                owns_client=True,
            )  # fmt: skip
        async with store:
            yield store


async def raw_state(client: Redis, keys: KeySpace, route_id: str) -> dict[str, Any]:
    """Everything a transition of `route_id` can touch, read as redis-cli would."""
    return {
        "route": await client.hgetall(keys.route(route_id)),
        "attempts": await client.lrange(keys.attempts(route_id), 0, -1),
        "schedule": await client.hgetall(keys.schedule(route_id)),
        "schedules": await client.zrange(keys.schedules, 0, -1, withscores=True),
        "events": await client.xlen(keys.events),
    }


def unique_keys() -> KeySpace:
    return KeySpace(f"recovery-test-{uuid.uuid4().hex[:12]}")


def _delete_prefix(url: str, keys: KeySpace) -> None:
    client = redis.Redis.from_url(url)
    try:
        stale = list(client.scan_iter(match=keys.pattern(), count=1000))
        if stale:
            client.delete(*stale)
    finally:
        client.close()


@pytest.fixture
def real_backend(redis_url: str) -> Iterator[Backend]:
    keys = unique_keys()
    yield Backend("redis", keys, ManualClock(T0), url=redis_url)
    _delete_prefix(redis_url, keys)


@pytest.fixture
def fake_backend() -> Backend:
    return Backend("fakeredis", unique_keys(), ManualClock(T0), fake_server=fakeredis.FakeServer())


@pytest.fixture(params=["fakeredis", pytest.param("redis", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> Backend:
    """The route-store semantics run on both: fast on fakeredis, for real on Redis."""
    name = "real_backend" if request.param == "redis" else "fake_backend"
    chosen: Backend = request.getfixturevalue(name)
    return chosen


@pytest.fixture(autouse=True)
def _closed_worker_engines() -> Iterator[None]:
    """Jobs run in this process start worker engines (a loop thread and pools each):
    none outlives its test."""
    yield
    close_engines()


# The dispatch rig's fixture, for every test under tests/actors/ (defined beside its rig).
from tests.actors.dispatch_rig import rig  # noqa: E402, F401
