"""The retention settings reach Redis through a route host: closed and utility routes
expire after the configured seconds, and the events stream is trimmed to the configured
length. The host runs in this process (no Ray) on the session's real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from redis.asyncio import Redis

from actors.engine.settings import EngineSettings
from actors.hosting.route_host import RouteHost
from actors.keys import KeySpace
from actors.routes.commands import Close, Start
from actors.routes.models import RouteSnapshot
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.actors.host_calls import one_call
from tests.actors.route_scenarios import candidate, profile

pytestmark = pytest.mark.integration

CLOSED_TTL_S = 120
UTILITY_TTL_S = 60
EVENTS_MAXLEN = 1
EVENTS_WRITTEN = 300  # Redis trims approximately, a whole stream node (100 entries) at a time


@pytest.fixture
def keys(redis_url: str) -> Iterator[KeySpace]:
    chosen = unique_keys()
    yield chosen
    _delete_prefix(redis_url, chosen)


@asynccontextmanager
async def retention_host(redis_url: str, keys: KeySpace) -> AsyncIterator[RouteHost]:
    settings = EngineSettings(
        key_prefix=keys.prefix, events_maxlen=EVENTS_MAXLEN, closed_ttl_s=CLOSED_TTL_S,
        utility_ttl_s=UTILITY_TTL_S,
    )  # fmt: skip
    host = RouteHost("host-0", redis_url, settings)
    await host.ready()
    try:
        yield host
    finally:
        await host.aclose()


async def start(host: RouteHost, route_id: str, caller: str = "kanban") -> int:
    command = Start(profile(candidate("claude")), caller=caller, invocation_id=f"inv-{route_id}")
    snapshot: RouteSnapshot = await one_call(host, route_id, command)
    return snapshot.generation


async def close(host: RouteHost, route_id: str, generation: int) -> None:
    await one_call(host, route_id, Close(generation))


async def ttl(redis_url: str, key: str) -> int:
    client = Redis.from_url(redis_url)
    try:
        return int(await client.ttl(key))
    finally:
        await client.aclose()


def test_a_closed_route_expires_after_the_configured_seconds(
    redis_url: str, keys: KeySpace
) -> None:
    async def scenario() -> int:
        async with retention_host(redis_url, keys) as host:
            await close(host, "done-1", await start(host, "done-1"))
        return await ttl(redis_url, keys.route("done-1"))

    assert 0 < asyncio.run(scenario()) <= CLOSED_TTL_S


def test_a_utility_route_expires_after_the_configured_seconds(
    redis_url: str, keys: KeySpace
) -> None:
    async def scenario() -> int:
        async with retention_host(redis_url, keys) as host:
            await start(host, "utility-1", caller="utility")
        return await ttl(redis_url, keys.route("utility-1"))

    assert 0 < asyncio.run(scenario()) <= UTILITY_TTL_S


def test_the_events_stream_is_trimmed_to_the_configured_length(
    redis_url: str, keys: KeySpace
) -> None:
    async def scenario() -> int:
        async with retention_host(redis_url, keys) as host:
            for index in range(EVENTS_WRITTEN // 2):  # a start and a close: two events
                route_id = f"route-{index}"
                await close(host, route_id, await start(host, route_id))
        client = Redis.from_url(redis_url)
        try:
            return int(await client.xlen(keys.events))
        finally:
            await client.aclose()

    # Untrimmed (the default MAXLEN is far above), all 300 would remain.
    assert EVENTS_WRITTEN < DEFAULT_EVENTS_MAXLEN
    assert asyncio.run(scenario()) < EVENTS_WRITTEN


def test_a_host_closed_right_after_it_is_ready_stops_following_its_wakes(
    redis_url: str, keys: KeySpace
) -> None:
    """A cancel landing while the wake follower opens its connection was swallowed by
    redis-py, and closing the host hung."""

    async def scenario() -> bool:
        host = RouteHost("host-0", redis_url, EngineSettings(key_prefix=keys.prefix))
        await host.ready()
        follower = host._follower
        assert follower.following
        await asyncio.wait_for(host.aclose(), timeout=3)  # closing takes ~0.05 s
        return not follower.following

    assert asyncio.run(scenario())
