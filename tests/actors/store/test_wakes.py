"""The wake stream of a route host (actors/store/wakes.py): waits and delivered dispatches
announced by jobs, read back in order by the host; entries that do not decode are
skipped. On fakeredis and on the session's real Redis."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from actors.keys import AttemptFence
from actors.routes.models import RouteSnapshot
from actors.store.wakes import (
    Delivered,
    Dispatched,
    Wake,
    announce_delivered,
    announce_dispatched,
    announce_waits,
    last_wake_id,
    next_wakes,
)
from tests.actors.conftest import Backend
from tests.actors.route_builders import T0

HOST = "host-0"


def test_waits_and_deliveries_come_back_in_the_order_they_were_announced(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        client = backend.raw()
        try:
            waiting = RouteSnapshot(
                route_id="r1", generation=2, state="retry_wait", attempt_ordinal=3,
                deadline=T0 + timedelta(seconds=5),
            )  # fmt: skip
            start = await last_wake_id(client, backend.keys, HOST)
            assert start == "0-0"
            await announce_delivered(client, backend.keys, HOST, [AttemptFence("r0", 1, 1)])
            await announce_waits(client, backend.keys, HOST, [waiting])
            await announce_delivered(client, backend.keys, HOST, [AttemptFence("r2", 3, 4)])
            last = await last_wake_id(client, backend.keys, HOST)
            after, wakes = await next_wakes(client, backend.keys, HOST, start, block_ms=1)
            assert after == last
            assert wakes == [
                Delivered(AttemptFence("r0", 1, 1)),
                Wake(AttemptFence("r1", 2, 3), T0 + timedelta(seconds=5)),
                Delivered(AttemptFence("r2", 3, 4)),
            ]
        finally:
            await client.aclose()

    asyncio.run(scenario())


def test_a_dispatcher_calls_outcome_status_and_latency_come_back_as_announced(
    backend: Backend,
) -> None:
    calls = [
        Dispatched(AttemptFence("r1", 1, 1), "not_dispatched", 503, 12.5),
        Dispatched(AttemptFence("r1", 1, 1), "delivered", 200, 7.0),
        Dispatched(AttemptFence("r2", 2, 3), "not_dispatched", None, 0.25),  # refused
    ]

    async def scenario() -> None:
        client = backend.raw()
        try:
            start = await last_wake_id(client, backend.keys, HOST)
            await announce_dispatched(client, backend.keys, HOST, calls)
            _after, wakes = await next_wakes(client, backend.keys, HOST, start, block_ms=1)
            assert wakes == calls
        finally:
            await client.aclose()

    asyncio.run(scenario())


def test_an_entry_that_does_not_decode_is_skipped(backend: Backend) -> None:
    async def scenario() -> None:
        client = backend.raw()
        stream = backend.keys.host_wakes(HOST)
        try:
            await client.xadd(stream, {"kind": "delivered", "route": "r1", "generation": "x",
                                       "ordinal": "1"})  # fmt: skip
            await client.xadd(stream, {"route": "r1", "generation": "1", "ordinal": "1"})
            await client.xadd(stream, {"kind": "delivered", "route": "r1", "ordinal": "1"})
            await announce_delivered(client, backend.keys, HOST, [AttemptFence("r1", 1, 2)])
            _, wakes = await next_wakes(client, backend.keys, HOST, "0-0", block_ms=1)
            assert wakes == [Delivered(AttemptFence("r1", 1, 2))]
        finally:
            await client.aclose()

    asyncio.run(scenario())
