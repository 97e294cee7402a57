"""When Redis fails, the caller gets StoreUnavailableError and nothing else happens."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from actors.clock import ManualClock
from actors.errors import InvalidRouteIdError, StoreUnavailableError
from actors.routes.models import RouteSnapshot
from actors.store.embedded import EmbeddedRedis
from actors.store.route_store import RouteStore
from tests.actors.conftest import Backend, unique_keys
from tests.actors.route_builders import T0, deadline_reached, in_seconds, retry_wait, start


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # released: nothing listens there now


def _every_operation(store: RouteStore) -> dict[str, Callable[[], Awaitable[Any]]]:
    return {
        "apply": lambda: store.apply(start("route-1")),
        "apply_many": lambda: store.apply_many([start("route-1"), start("route-2")]),
        "snapshot": lambda: store.snapshot("route-1"),
        "history": lambda: store.history("route-1"),
        "schedules": store.schedules,
        "due_schedules": lambda: store.due_schedules(in_seconds(60), limit=10),
        "events": store.events,
    }


@pytest.mark.integration
def test_a_store_pointed_at_a_closed_port_raises_store_unavailable_everywhere() -> None:
    async def scenario() -> dict[str, BaseException | None]:
        url = f"redis://127.0.0.1:{_closed_port()}/0"
        outcomes: dict[str, BaseException | None] = {}
        async with RouteStore.connect(url, clock=ManualClock(T0), timeout_s=2.0) as store:
            for name, operation in _every_operation(store).items():
                try:
                    await operation()
                    outcomes[name] = None
                except Exception as error:  # collected and asserted below
                    outcomes[name] = error
        return outcomes

    outcomes = asyncio.run(scenario())
    for name, error in outcomes.items():
        assert isinstance(error, StoreUnavailableError), name
        assert error.operation == name
        assert "ConnectionError" in error.detail


@pytest.mark.integration
def test_a_store_whose_redis_stopped_raises_and_wrote_nothing(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "data")
    keys = unique_keys()
    clock = ManualClock(T0)

    async def before_the_stop(url: str) -> None:
        async with RouteStore.connect(url, clock=clock, keys=keys) as store:
            await store.apply(start("route-1"))
            server.stop()
            with pytest.raises(StoreUnavailableError) as caught:
                await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5)))
            assert caught.value.operation == "apply"
            with pytest.raises(StoreUnavailableError):
                await store.apply_many([retry_wait("route-1", 1, deadline=in_seconds(5))])

    async def after_the_restart(url: str) -> RouteSnapshot:
        async with RouteStore.connect(url, clock=clock, keys=keys) as store:
            assert [r.decision for r in await store.history("route-1")] == ["start"]
            assert await store.schedules() == []
            assert len(await store.events()) == 1
            return await store.snapshot("route-1")

    try:
        asyncio.run(before_the_stop(server.start()))
        snapshot = asyncio.run(after_the_restart(server.start()))
    finally:
        server.stop()
    assert (snapshot.state, snapshot.generation) == ("active", 1)


def test_a_script_error_raises_store_unavailable_and_writes_nothing(backend: Backend) -> None:
    async def scenario() -> None:
        client = backend.raw()
        async with backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5)))
            await client.set(store.keys.attempts("route-2"), "not a list")
            await store.apply(start("route-3"))
            events = await client.xlen(store.keys.events)
            with pytest.raises(StoreUnavailableError) as caught:
                await store.apply(start("route-2"))  # RPUSH onto a string: WRONGTYPE
            assert "WRONGTYPE" in caught.value.detail
            assert (await store.snapshot("route-2")).state == "none", "no half transition"
            # In a batch, only the broken item fails; its neighbours apply.
            results = await store.apply_many(
                [deadline_reached("route-1", 1), start("route-2"), start("route-4")]
            )
            assert isinstance(results[0], RouteSnapshot)
            assert isinstance(results[1], StoreUnavailableError)
            assert isinstance(results[2], RouteSnapshot)
            assert await client.xlen(store.keys.events) == events + 2
        await client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("route_id", ["", "a b", "a:b", "a*", "{a}", "é", "x" * 129, "a\nb"])
def test_a_bad_route_id_raises_the_typed_error_before_redis_is_asked(
    fake_backend: Backend, route_id: str
) -> None:
    async def scenario() -> None:
        async with fake_backend.store() as store:
            with pytest.raises(InvalidRouteIdError) as caught:
                await store.snapshot(route_id)
            assert caught.value.route_id == route_id
            with pytest.raises(InvalidRouteIdError):
                await store.history(route_id)

    asyncio.run(scenario())
    with pytest.raises(InvalidRouteIdError, match="invalid route id"):
        start(route_id)
