"""A route host's wake follower (actors/hosting/host_wakes.py), without Ray: waits arm
timers, delivered dispatches go to the notices, and `followed` returns once an entry was
taken. On fakeredis and on the session's real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest

from actors.hosting.host_wakes import WakeFollower
from actors.keys import AttemptFence
from actors.routes.models import RouteSnapshot
from actors.store.wakes import (
    Dispatched,
    announce_delivered,
    announce_dispatched,
    announce_waits,
    last_wake_id,
)
from tests.actors.conftest import Backend
from tests.actors.route_builders import T0

HOST = "host-0"
TIMEOUT_S = 10.0  # a catastrophe guard: the follower takes an entry within milliseconds


def test_the_follower_arms_waits_hands_on_deliveries_and_says_when_it_took_them(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        client = backend.raw()
        armed: list[tuple[AttemptFence, datetime]] = []
        delivered: list[list[AttemptFence]] = []

        async def take(attempts: Sequence[AttemptFence]) -> None:
            delivered.append(list(attempts))

        follower = WakeFollower(
            client, backend.keys, HOST, arm=lambda f, d: armed.append((f, d)), delivered=take
        )
        try:
            await announce_delivered(client, backend.keys, HOST, [AttemptFence("old", 1, 1)])
            start = await last_wake_id(client, backend.keys, HOST)
            follower.start(start)
            await asyncio.wait_for(follower.followed(start), TIMEOUT_S)  # older: at once
            waiting = RouteSnapshot(
                route_id="r1", generation=1, state="retry_wait", attempt_ordinal=2,
                deadline=T0 + timedelta(seconds=5),
            )  # fmt: skip
            await announce_waits(client, backend.keys, HOST, [waiting])
            await announce_delivered(
                client, backend.keys, HOST, [AttemptFence("r2", 1, 1), AttemptFence("r3", 2, 1)]
            )
            last = await last_wake_id(client, backend.keys, HOST)
            await asyncio.wait_for(follower.followed(last), TIMEOUT_S)
            assert armed == [(AttemptFence("r1", 1, 2), T0 + timedelta(seconds=5))]
            taken = [attempt for batch in delivered for attempt in batch]
            assert taken == [AttemptFence("r2", 1, 1), AttemptFence("r3", 2, 1)]  # not "old"
            assert follower.following
        finally:
            await follower.aclose()
            await client.aclose()
        assert not follower.following

    asyncio.run(scenario())


def test_the_follower_hands_a_dispatcher_calls_facts_to_the_hosts_metrics(
    fake_backend: Backend,
) -> None:
    async def scenario() -> None:
        client = fake_backend.raw()
        seen: list[Dispatched] = []

        async def nothing(attempts: Sequence[AttemptFence]) -> None:
            raise AssertionError(f"no delivery was announced: {attempts}")

        follower = WakeFollower(
            client, fake_backend.keys, HOST, arm=lambda f, d: None, delivered=nothing,
            dispatched=seen.append,
        )  # fmt: skip
        call = Dispatched(AttemptFence("r1", 1, 2), "failed", 500, 31.0)
        try:
            follower.start(await last_wake_id(client, fake_backend.keys, HOST))
            await announce_dispatched(client, fake_backend.keys, HOST, [call])
            last = await last_wake_id(client, fake_backend.keys, HOST)
            await asyncio.wait_for(follower.followed(last), TIMEOUT_S)
            assert seen == [call]
        finally:
            await follower.aclose()
            await client.aclose()

    asyncio.run(scenario())


def test_a_delivery_being_handed_on_holds_up_no_later_wait_and_followed_waits_for_it(
    backend: Backend,
) -> None:
    """The notices may be slow (a session's guard held by a slow transcript call): the
    waits read after the delivery are armed meanwhile, and `followed` returns only once
    the delivery was handed on."""

    async def scenario() -> None:
        client = backend.raw()
        seen: list[str] = []
        handing, release, armed = asyncio.Event(), asyncio.Event(), asyncio.Event()

        def arm(fence: AttemptFence, deadline: datetime) -> None:
            seen.append(f"armed {fence.route_id}")
            armed.set()

        async def slow(attempts: Sequence[AttemptFence]) -> None:
            handing.set()
            await release.wait()
            seen.extend(f"delivered {attempt.route_id}" for attempt in attempts)

        follower = WakeFollower(client, backend.keys, HOST, arm=arm, delivered=slow)
        try:
            follower.start(await last_wake_id(client, backend.keys, HOST))
            await announce_delivered(client, backend.keys, HOST, [AttemptFence("r2", 1, 1)])
            await asyncio.wait_for(handing.wait(), TIMEOUT_S)
            waiting = RouteSnapshot(
                route_id="r1", generation=1, state="retry_wait", attempt_ordinal=2,
                deadline=T0 + timedelta(seconds=5),
            )  # fmt: skip
            await announce_waits(client, backend.keys, HOST, [waiting])
            await asyncio.wait_for(armed.wait(), TIMEOUT_S)  # while r2 is still held
            last = await last_wake_id(client, backend.keys, HOST)

            async def follow() -> None:
                await follower.followed(last)
                seen.append("followed")

            following = asyncio.create_task(follow())
            release.set()
            await asyncio.wait_for(following, TIMEOUT_S)
            assert seen == ["armed r1", "delivered r2", "followed"]
        finally:
            await follower.aclose()
            await client.aclose()

    asyncio.run(scenario())


def test_a_stream_id_of_another_shape_is_refused(fake_backend: Backend) -> None:
    async def nothing(attempts: Sequence[AttemptFence]) -> None:
        raise AssertionError(f"nothing was announced, got {attempts}")

    async def scenario() -> None:
        client = fake_backend.raw()
        follower = WakeFollower(
            client, fake_backend.keys, HOST, arm=lambda f, d: None, delivered=nothing
        )
        try:
            with pytest.raises(ValueError, match="'<ms>-<seq>', got 'latest'"):
                await follower.followed("latest")
        finally:
            await client.aclose()

    asyncio.run(scenario())
