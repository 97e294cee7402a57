"""A timer and manual actions racing on one generation, on the real Redis: exactly one
of them takes effect, none twice, and the history says which."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import pytest
from redis.asyncio import Redis

from actors.clock import ManualClock
from actors.engine.service import RouteService
from actors.errors import TransitionRejectedError
from actors.keys import AttemptFence
from tests.actors.conftest import Backend
from tests.actors.route_scenarios import Session, overloaded

pytestmark = pytest.mark.integration

ITERATIONS: Final = 200
# What the winner leaves behind: (state, generation, candidate).
OUTCOMES: Final = {
    "deadline_reached": ("retrying", 1, "claude"),
    "skip_now": ("active", 2, "codex"),
    "cancel_wait": ("action_required", 1, "claude"),
}


@dataclass(frozen=True)
class Racers:
    """Who races: the timer's service and the manual actions' one (maybe the same)."""

    timer: RouteService
    manual: RouteService
    clock: ManualClock
    raw: Redis


async def _race_once(racers: Racers, route_id: str, shuffler: random.Random) -> str:
    timer, manual, raw = racers.timer, racers.manual, racers.raw
    session = Session(manual, racers.clock, route_id)
    await session.start()
    waiting = await session.fail(overloaded())
    assert waiting.deadline is not None
    session.clock.set(waiting.deadline)
    latest = await raw.xrevrange(manual.store.keys.events, count=1)
    assert latest, "the start and the retry were published"
    before_race = str(latest[0][0])
    contenders: list[Callable[[], Awaitable[object]]] = [
        lambda: timer.fire_due(AttemptFence(route_id, 1, 1)),
        lambda: timer.fire_due(
            AttemptFence(route_id, 1, 1)
        ),  # the in-process timer and the rq backstop
        lambda: manual.skip_now(route_id, 1),
        lambda: manual.cancel_wait(route_id, 1),
    ]
    shuffler.shuffle(contenders)
    results = await asyncio.gather(*(call() for call in contenders), return_exceptions=True)
    for result in results:
        assert not isinstance(result, BaseException) or isinstance(
            result, TransitionRejectedError
        ), result
    history = await session.decisions()
    assert history[:2] == ["start", "retry"]
    assert len(history) == 3, f"exactly one winner, got {history}"
    winner = history[2]
    final = await manual.snapshot(route_id)
    assert (final.state, final.generation, final.candidate_id) == OUTCOMES[winner]
    assert await manual.store.due_schedules(session.clock.now(), limit=10) == []
    raced = await manual.store.events(after=before_race)
    assert [e.route_id for e in raced] == [route_id] * (2 if winner == "skip_now" else 1)
    return winner


@pytest.mark.parametrize("owners", ["one service", "two services"])
def test_a_timer_a_manual_skip_and_a_cancel_racing_on_one_generation_commit_exactly_one(
    real_backend: Backend, owners: str
) -> None:
    """With one service the per-route lock orders them; with two (two hosts, or a host
    and a backstop job) only Redis's fence does. Either way exactly one wins."""
    shuffler = random.Random(4)

    async def scenario() -> Counter[str]:
        raw = real_backend.raw()
        async with real_backend.store() as store, real_backend.store() as other:
            manual = RouteService(store, real_backend.clock)
            timer = manual if owners == "one service" else RouteService(other, real_backend.clock)
            racers = Racers(timer, manual, real_backend.clock, raw)
            winners: Counter[str] = Counter()
            for n in range(ITERATIONS):
                winners[await _race_once(racers, f"race-{n}", shuffler)] += 1
            assert len(manual.locks) == len(timer.locks) == 0, "no lock outlives its calls"
        await raw.aclose()
        return winners

    winners = asyncio.run(scenario())
    assert sum(winners.values()) == ITERATIONS
    assert set(winners) == set(OUTCOMES), f"every racer won some iterations: {winners}"
