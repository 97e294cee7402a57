"""Churn: random interleavings of failures, dispatches, successes, cancels, stops, skips,
deletions, late provider events, port faults and time over many sessions (seeded).
Afterwards no `retrying: true` message is left, none was ever written for a retired
attempt, and the guard table is empty once the fences ran out."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import fakeredis
import pytest
from fakeredis.aioredis import FakeRedis
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.clock import ManualClock
from actors.store.redis_transcript import RedisTranscript
from actors.store.transcript import TranscriptPort
from tests.actors.conftest import Backend, unique_keys
from tests.actors.engine.churn_model import KINDS, Action, Churn, Session, random_rounds
from tests.actors.engine.transcript_fakes import MemoryTranscript
from tests.actors.route_builders import T0

SESSIONS = 6
ACTIONS = st.tuples(
    st.sampled_from(KINDS), st.integers(0, SESSIONS - 1), st.integers(0, (1 << 20) - 1)
)
SEEDS = st.integers(0, 1 << 16)
ROUNDS = st.lists(st.lists(ACTIONS, min_size=1, max_size=8), min_size=1, max_size=30)


async def churn(port: TranscriptPort, clock: ManualClock, rounds: Sequence[Sequence[Action]],
                sessions: int, seed: int) -> Churn:  # fmt: skip
    run = Churn(port, clock, [Session(f"route-{n}") for n in range(sessions)], seed=seed)
    await run.run(rounds)
    await run.finish()
    return run


def assert_nothing_left(run: Churn) -> None:
    assert run.violations == []
    guards = run.notices.guards
    assert guards.live_entries == 0, dict(guards.entries)
    assert guards.entries_past_fence() == []
    assert run.scheduler.pending == 0


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(rounds=ROUNDS, seed=SEEDS)
def test_churn_on_the_memory_port_leaves_no_notice_and_no_entry(
    rounds: list[list[Action]], seed: int
) -> None:
    clock = ManualClock(T0)
    run = asyncio.run(churn(MemoryTranscript(clock), clock, rounds, SESSIONS, seed))
    assert_nothing_left(run)


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(rounds=ROUNDS, seed=SEEDS)
def test_churn_on_the_redis_transcript_leaves_no_notice_and_no_entry(
    rounds: list[list[Action]], seed: int
) -> None:
    async def scenario() -> Churn:
        clock = ManualClock(T0)
        client = FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
        async with RedisTranscript(
            client, clock=clock, keys=unique_keys(), owns_client=True
        ) as port:
            return await churn(port, clock, rounds, SESSIONS, seed)

    assert_nothing_left(asyncio.run(scenario()))


def test_a_long_seeded_churn_of_two_hundred_sessions_on_memory_is_clean() -> None:
    clock = ManualClock(T0)
    run = asyncio.run(churn(MemoryTranscript(clock), clock, random_rounds(21, 200, 600), 200, 21))
    assert_nothing_left(run)
    assert run.written > 100
    assert run.refused_late > 10


@pytest.mark.integration
def test_a_seeded_churn_on_the_real_redis_transcript_is_clean(real_backend: Backend) -> None:
    async def scenario() -> Churn:
        port = RedisTranscript(real_backend.raw(), clock=real_backend.clock,
                               keys=real_backend.keys, owns_client=True)  # fmt: skip
        async with port:
            run = await churn(port, real_backend.clock, random_rounds(7, 100, 300), 100, 7)
            assert await port.sessions() == []  # every message gone, every index too
            return run

    run = asyncio.run(scenario())
    assert_nothing_left(run)
    assert run.written > 50
