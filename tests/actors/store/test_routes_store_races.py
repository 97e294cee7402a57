"""Concurrent transitions on one generation, and batching, against a real Redis."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from redis.asyncio import Redis

from actors.errors import InvalidStateError, StaleGenerationError, TransitionRejectedError
from actors.routes.models import RouteSnapshot
from actors.store.route_store import RouteStore
from tests.actors.conftest import Backend
from tests.actors.route_builders import (
    cancel_wait,
    deadline_reached,
    in_seconds,
    retry_wait,
    skip_now,
    start,
)

pytestmark = pytest.mark.integration

CONTENDERS = 200


def _winners(results: list[RouteSnapshot | BaseException]) -> list[RouteSnapshot]:
    return [r for r in results if isinstance(r, RouteSnapshot)]


def test_200_concurrent_applies_on_one_generation_let_exactly_one_win(
    real_backend: Backend,
) -> None:
    async def scenario() -> None:
        async with real_backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5)))
            history_before = len(await store.history("route-1"))
            events_before = len(await store.events())
            contenders = [
                skip_now("route-1", 1, reason=f"contender {n}") for n in range(CONTENDERS)
            ]
            tasks = [asyncio.create_task(store.apply(t)) for t in contenders]
            results = await asyncio.gather(*tasks, return_exceptions=True)

            winners = _winners(results)
            assert len(winners) == 1
            losers = [r for r in results if not isinstance(r, RouteSnapshot)]
            assert len(losers) == CONTENDERS - 1
            stale = [r for r in losers if isinstance(r, StaleGenerationError)]
            assert len(stale) == len(losers)
            assert {(r.expected, r.actual) for r in stale} == {(1, 2)}

            stored = await store.snapshot("route-1")
            assert stored == winners[0]
            history = await store.history("route-1")
            assert len(history) == history_before + 1
            assert history[-1].reason == winners[0].reason
            assert len(await store.events()) == events_before + 1
            assert await store.schedules() == [], "the skip cleared the wait's schedule"

    asyncio.run(scenario())


def test_a_timer_a_skip_and_a_cancel_racing_on_one_wait_commit_exactly_one(
    real_backend: Backend,
) -> None:
    shuffler = random.Random(4)

    async def scenario() -> None:
        async with real_backend.store() as store:
            routes = [f"route-{n}" for n in range(50)]
            await store.apply_many([start(r) for r in routes])
            await store.apply_many([retry_wait(r, 1, deadline=in_seconds(5)) for r in routes])
            for route_id in routes:
                racers = [
                    deadline_reached(route_id, 1), skip_now(route_id, 1),
                    cancel_wait(route_id, 1),
                ] * 4  # fmt: skip
                shuffler.shuffle(racers)
                results = await asyncio.gather(
                    *(store.apply(t) for t in racers), return_exceptions=True
                )
                winners = _winners(results)
                assert len(winners) == 1, route_id
                rejected = [r for r in results if not isinstance(r, RouteSnapshot)]
                assert all(isinstance(r, TransitionRejectedError) for r in rejected)
                assert await store.snapshot(route_id) == winners[0]
                history = [r.decision for r in await store.history(route_id)]
                expected_tail = {"retrying": [], "switching": ["skip_now"]}.get(
                    winners[0].state, ["cancel_wait"]
                )
                assert history == ["start", "retry", *expected_tail]
            assert await store.schedules() == [], "whichever won, the wait is over"

    asyncio.run(scenario())


def test_non_bumping_racers_lose_on_state_rather_than_generation(
    real_backend: Backend,
) -> None:
    async def scenario() -> list[Any]:
        async with real_backend.store() as store:
            await store.apply(start("route-1"))
            await store.apply(retry_wait("route-1", 1, deadline=in_seconds(5)))
            fired = [deadline_reached("route-1", 1) for _ in range(20)]
            return await asyncio.gather(*(store.apply(t) for t in fired), return_exceptions=True)

    results = asyncio.run(scenario())
    assert len(_winners(results)) == 1
    losers = [r for r in results if not isinstance(r, RouteSnapshot)]
    assert all(isinstance(r, InvalidStateError) and r.state == "retrying" for r in losers)


class CountingRedis(Redis):
    """Counts how transitions reach Redis: direct EVALSHA calls and pipelines."""

    direct_calls = 0
    pipelines = 0

    def evalsha(self, *args: Any, **kwargs: Any) -> Any:
        CountingRedis.direct_calls += 1
        return super().evalsha(*args, **kwargs)

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        CountingRedis.pipelines += 1
        return super().pipeline(*args, **kwargs)


def test_apply_many_sends_a_whole_batch_as_one_pipeline(real_backend: Backend) -> None:
    async def scenario() -> list[RouteSnapshot | BaseException]:
        assert real_backend.url is not None
        client = CountingRedis.from_url(real_backend.url, decode_responses=True)
        store = RouteStore(client, clock=real_backend.clock, keys=real_backend.keys)
        await client.script_load(store._transition.source)  # already cached, as in steady state
        CountingRedis.direct_calls = CountingRedis.pipelines = 0
        results: list[RouteSnapshot | BaseException] = list(
            await store.apply_many([start(f"route-{n}") for n in range(100)])
        )
        await client.aclose()
        return results

    results = asyncio.run(scenario())
    assert len(_winners(results)) == 100
    assert (CountingRedis.pipelines, CountingRedis.direct_calls) == (1, 0)
