"""Races through the runtime (issue 4, must show): a timer, a manual action and a
provider event on the same generation of a waiting route, run concurrently 1,000 times
with random interleavings, across two route hosts, with real rq workers dispatching.

Each round is its own route: it starts, fails once (retry 1 of 1 in 1 s, then stop) and
waits; at its deadline ± a few tens of milliseconds (seeded), the three contenders are
sent in a seeded random order with seeded random small awaits between them:

- the timer: the host's own in-process timer fires at the deadline, and the durable
  backstop's entry point `fire_due(route, generation, ordinal)` is called too;
- a manual action with the expected generation: retry_now, skip_now, cancel_wait or stop;
- a provider event with the expected generation: report_failure or report_success.

Then, from Redis, for every round: exactly one contender moved the route out of its wait
(the first record after the wait); no contender was applied twice; a call rejected with
a typed error left no record; the others were rejected or no-ops, except what the route
legitimately takes once the winner left it `retrying` — a stop, or a report of the
retried attempt (reports are fenced by generation, which a retry keeps); the history
starts with the records before the round (append-only) and ends with the record the
final snapshot is the result of; no (route, generation, ordinal) was dispatched twice,
and a route still retrying was dispatched exactly once.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import pytest
import redis
from rq import Queue
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer

from actors.errors import TransitionRejectedError
from actors.hosting.runtime import RecoveryRuntime, RouteHandle
from actors.jobs.ledger import DispatchLedger
from actors.keys import AttemptFence, KeySpace
from actors.routes.commands import FireDue
from actors.routes.models import AttemptRecord, RouteSnapshot
from actors.store.route_codec import decode_attempt, decode_route
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.fake_dispatcher import calls_key
from tests.actors.host_calls import one_remote_call
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

SEED: Final = 20260301
ROUNDS: Final = 1000
CONCURRENT_ROUNDS: Final = 150
# Contenders are sent from this much before the deadline to this much after it: a call
# takes tens of milliseconds to reach its host under this load, so the window leans early
# to let each contender win some rounds.
OFFSET_S: Final = (-0.15, 0.05)
GAP_S: Final = 0.004  # at most this between two contenders
SETTLE_TIMEOUT_S: Final = 120.0
DELIVER: Final = "tests.actors.fake_dispatcher:deliver"
MANUAL: Final = ("retry_now", "skip_now", "cancel_wait", "stop")
PROVIDER: Final = ("report_failure", "report_success")
# The records that take a route out of its wait, and the state each leaves it in.
LEAVE_WAIT: Final = {
    "deadline_reached": "retrying",
    "retry_now": "retrying",
    "skip_now": "active",  # the next candidate, generation 2 (the switch completes)
    "cancel_wait": "action_required",
    "stop": "action_required",
}
AFTER_REPORT: Final = {"success": "active", "stop": "action_required"}
USER_STOP: Final = "stopped by the user"


def one_retry_then_stop() -> DynamicProfile:
    # No provider binding, so no shared circuit: a thousand overload reports would open
    # the provider's circuit (issue 5) and park every round, a test of circuits, not of
    # this race (tests/actors/engine/test_route_circuits.py has those).
    claude = candidate("claude", transient=retries(1, 1, Outcome.STOP))
    unbound = claude.model_copy(update={"provider": None})
    return profile(unbound, candidate("codex"))


@dataclass
class Round:
    """One route's race: what was sent, in which order, and what each call returned."""

    route_id: str
    order: list[str]
    manual: str
    provider: str
    offset_s: float
    gaps_s: list[float]
    outcomes: dict[str, RouteSnapshot | TransitionRejectedError] = field(default_factory=dict)

    @classmethod
    def drawn(cls, index: int, rng: random.Random) -> Round:
        return cls(
            route_id=f"race-{index}",
            order=rng.sample(["timer", "manual", "provider"], 3),
            manual=rng.choice(MANUAL),
            provider=rng.choice(PROVIDER),
            offset_s=rng.uniform(*OFFSET_S),
            gaps_s=[rng.uniform(0, GAP_S) for _ in range(2)],
        )


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = RecoveryRuntime(
        redis_url=redis_url, key_prefix=f"recovery-race-{uuid.uuid4().hex[:12]}", host_count=2,
        dispatcher=DELIVER, worker_count=1,
    ).start()  # fmt: skip
    try:
        yield started
    finally:
        started.shutdown()
        _delete_prefix(redis_url, KeySpace(started.key_prefix))


def contender(race: Round, kind: str, route: RouteHandle) -> Callable[[], Awaitable[Any]]:
    invocation = f"inv-{race.route_id}"
    if kind == "timer":
        return lambda: one_remote_call(route.host, race.route_id, FireDue(1, 1))
    if kind == "manual":
        return lambda: getattr(route, race.manual)(1)
    if race.provider == "report_success":
        return lambda: route.report_success(1)
    return lambda: route.report_failure(
        1, overloaded(), safe_turn(), caller="kanban", invocation_id=invocation
    )


async def run_round(runtime: RecoveryRuntime, race: Round) -> None:
    route = runtime.route(race.route_id)
    invocation = f"inv-{race.route_id}"
    await route.start(one_retry_then_stop(), caller="kanban", invocation_id=invocation)
    waiting = await route.report_failure(
        1, overloaded(), safe_turn(), caller="kanban", invocation_id=invocation
    )
    assert (waiting.state, waiting.attempt_ordinal) == ("retry_wait", 1), waiting
    assert waiting.deadline is not None
    # The race is around the deadline: sleeping until a moment is the test's input here, not
    # a wait for a condition.
    await asyncio.sleep(max(0.0, waiting.deadline.timestamp() + race.offset_s - time.time()))
    calls: list[asyncio.Task[None]] = []
    for position, kind in enumerate(race.order):
        calls.append(asyncio.create_task(record_outcome(race, kind, contender(race, kind, route))))
        if position < 2:
            await asyncio.sleep(race.gaps_s[position])
    await asyncio.gather(*calls)


async def record_outcome(race: Round, kind: str, call: Callable[[], Awaitable[Any]]) -> None:
    try:
        race.outcomes[kind] = await call()
    except TransitionRejectedError as rejected:
        race.outcomes[kind] = rejected


async def run_rounds(runtime: RecoveryRuntime, rounds: list[Round]) -> None:
    gate = asyncio.Semaphore(CONCURRENT_ROUNDS)

    async def gated(race: Round) -> None:
        async with gate:
            await run_round(runtime, race)

    await asyncio.gather(*(gated(race) for race in rounds))


def contender_of(record: AttemptRecord) -> str:
    """Which contender wrote a round's record."""
    if record.decision == "deadline_reached":
        return "timer"
    if record.decision in ("retry_now", "skip_now", "cancel_wait"):
        return "manual"
    if record.decision == "stop" and record.reason == USER_STOP:
        return "manual"
    assert record.decision in AFTER_REPORT, record
    return "provider"


def check_round(
    race: Round, records: list[AttemptRecord], route: RouteSnapshot, dispatched: list[int]
) -> str:
    """The round's invariants (module docstring); the winning record's decision."""
    assert [(r.decision, r.generation, r.ordinal) for r in records[:2]] == [
        ("start", 1, 0), ("retry", 1, 1)
    ], "the records before the round are kept as they were"  # fmt: skip
    played = records[2:]
    writers = [contender_of(record) for record in played]
    assert len(writers) == len(set(writers)), f"{race}: applied twice: {played}"
    winner, *later = played
    assert winner.decision in LEAVE_WAIT, f"{race}: {played}"
    if LEAVE_WAIT[winner.decision] != "retrying":
        assert later == [], f"{race}: after {winner.decision}: {later}"
    for record in later:
        assert record.decision in ("stop", "success"), f"{race}: {played}"
    for kind, outcome in race.outcomes.items():
        if isinstance(outcome, TransitionRejectedError):
            assert kind not in writers, f"{race}: {kind} was rejected yet wrote {played}"
    last = played[-1]
    expected_state = AFTER_REPORT.get(last.decision, LEAVE_WAIT.get(last.decision))
    if last.decision == "stop":
        expected_state = "action_required"
    assert (route.state, route.generation) == (expected_state, last.generation), race
    assert len(dispatched) == len(set(dispatched)) <= 1, f"{race}: dispatched {dispatched}"
    if dispatched:
        assert LEAVE_WAIT[winner.decision] == "retrying", race
    if route.state == "retrying":
        assert dispatched == [1], f"{race}: a retrying route is dispatched exactly once"
    return winner.decision


def read_back(
    connection: redis.Redis, keys: KeySpace, route_ids: list[str]
) -> tuple[dict[str, list[AttemptRecord]], dict[str, RouteSnapshot]]:
    """Every round's history and snapshot, as Redis has them."""
    with connection.pipeline(transaction=False) as pipe:
        for route_id in route_ids:
            pipe.lrange(keys.attempts(route_id), 0, -1)
            pipe.hgetall(keys.route(route_id))
        replies = pipe.execute()
    histories: dict[str, list[AttemptRecord]] = {}
    routes: dict[str, RouteSnapshot] = {}
    for index, route_id in enumerate(route_ids):
        history, raw = replies[2 * index], replies[2 * index + 1]
        histories[route_id] = [decode_attempt(item.decode()) for item in history]
        texts = {k.decode(): v.decode() for k, v in raw.items()}
        routes[route_id] = decode_route(route_id, texts, keys.route(route_id))
    return histories, routes


def dispatch_calls(connection: redis.Redis, prefix: str) -> dict[str, list[int]]:
    """The recorded dispatcher calls: per route, the attempt ordinals (generation 1 only:
    any other generation fails the round)."""
    found: dict[str, list[int]] = {}
    for item in connection.lrange(calls_key(prefix), 0, -1):
        call = json.loads(item)
        assert call["generation"] == 1, call
        found.setdefault(call["route_id"], []).append(call["ordinal"])
    return found


async def wait_dispatches_settled(runtime: RecoveryRuntime, connection: redis.Redis) -> None:
    """Until the dispatch queue is empty and no job is running."""
    queue = Queue(runtime.queue, connection=connection, serializer=JSONSerializer)
    started = StartedJobRegistry(queue=queue)

    async def idle() -> bool:
        return queue.count == 0 and started.count == 0

    await wait_until(idle, SETTLE_TIMEOUT_S, redis_url=runtime.url)


def test_a_timer_a_manual_action_and_a_provider_event_race_a_thousand_times_one_wins_each_time(
    runtime: RecoveryRuntime, redis_url: str
) -> None:
    rng = random.Random(SEED)
    rounds = [Round.drawn(index, rng) for index in range(ROUNDS)]
    assert {runtime.host_index(r.route_id) for r in rounds} == {0, 1}, "rounds on both hosts"
    connection = redis.Redis.from_url(redis_url)
    keys = KeySpace(runtime.key_prefix)
    began = time.monotonic()
    try:
        asyncio.run(run_rounds(runtime, rounds))
        raced = time.monotonic() - began
        asyncio.run(wait_dispatches_settled(runtime, connection))
        histories, routes = read_back(connection, keys, [r.route_id for r in rounds])
        calls = dispatch_calls(connection, runtime.key_prefix)
        winners = Counter(
            check_round(race, histories[race.route_id], routes[race.route_id],
                        calls.get(race.route_id, []))
            for race in rounds
        )  # fmt: skip
        ledger = DispatchLedger(connection, keys)
        for route_id, ordinals in calls.items():
            assert (
                ledger.read(AttemptFence(route_id, 1, ordinals[0])).fields.get("outcome")
                == "delivered"
            )
        for host in runtime.hosts:
            assert asyncio.run(_pending_timers(host)) == 0, "no route waits any more"
    finally:
        connection.close()
    print(
        f"rounds={ROUNDS} raced_s={raced:.1f} total_s={time.monotonic() - began:.1f} "
        f"dispatched={len(calls)} winners={dict(winners)}"
    )
    # The interleavings were real: the timer won some rounds and a manual action others.
    assert winners["deadline_reached"] > 0, winners
    assert sum(winners[action] for action in MANUAL) > 0, winners


async def _pending_timers(host: Any) -> int:
    count: int = await host.pending_timers.remote()
    return count
