"""1,000 sessions of seeded churn through a real RouteHost Ray actor, the Redis transcript
port and the host's wake stream (the issue's "Must show"): random interleavings of
failure, retry, success, cancel, superseding attempt, stop, delete (close), delivered
dispatches and late provider events, sent as concurrent batches, cancels and wake-stream
announcements, so they reach the host's session guards in whatever order the host runs
them. Afterwards: zero `retrying: true` messages, zero written again after their
retirement (read from the transcript's own stream) and, read from the host's own guard
table, nothing owned and zero entries past their fence, then none at all once the host's
clock passes the fence.

The host runs on a ManualClock (a constructor argument, pickled into the actor): its
retry deadlines never come due while the test runs (retries are driven with RetryNow),
and `advance_clock` moves its session guards past the 5-minute fence without waiting for
it. No dispatcher runs: the dispatch jobs' announcements are written on the host's wake
stream by the function a job uses (`announce_delivered`). The failure is the agent's
transport lost, request-scoped, so no circuit opens and parks the fleet (the circuit
tests cover that lifecycle)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

import pytest
import ray
import redis
from redis.asyncio import Redis

from actors.clock import ManualClock
from actors.engine.notice_lifecycle import CancelOutcome
from actors.engine.session_guards import LATE_EVENT_FENCE
from actors.engine.settings import EngineSettings
from actors.errors import TransitionRejectedError
from actors.hosting.batcher import BatchItem, ReadSnapshot
from actors.hosting.installation import RemoteRouteHost
from actors.keys import AttemptFence, KeySpace
from actors.routes.commands import (
    Close,
    ReportFailure,
    ReportSuccess,
    Resume,
    RetryNow,
    RouteCommand,
    Start,
    StartFresh,
    StopRoute,
)
from actors.routes.models import RouteSnapshot
from actors.store.redis_transcript import decode_event
from actors.store.replies import reply_text, reply_texts
from actors.store.transcript_reads import read_notices
from actors.store.wakes import announce_delivered, last_wake_id
from policy import Outcome
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import candidate, profile, retries, safe_turn, transport_lost

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

SESSIONS: Final = 1000
ROUNDS: Final = 6
BATCHES: Final = 4  # concurrent run_batch calls per round
SEED: Final = 20260321
HOST: Final = "host-0"
TASK: Final = "task-churn"
TIMEOUT_S: Final = 120.0  # a catastrophe guard for one host call
PATIENT = profile(candidate("claude", transient=retries(3, 600, Outcome.STOP)))

Attempt = tuple[int, int]
# The commands that take only the generation the caller saw ("close": the session deleted).
BY_GENERATION: Final[dict[str, Callable[[int], RouteCommand]]] = {
    "succeed": ReportSuccess, "retry": RetryNow, "stop": StopRoute, "close": Close,
    "resume": Resume, "start_fresh": StartFresh,
}  # fmt: skip


@pytest.fixture
def keys(redis_url: str) -> Iterator[KeySpace]:
    chosen = unique_keys()
    yield chosen
    _delete_prefix(redis_url, chosen)


@dataclass
class Churn:
    """The test's side of the churn: the host, its wake stream, the seeded choices and
    what was sent."""

    host: Any
    keys: KeySpace
    client: Redis
    chooser: random.Random
    commands: list[BatchItem] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    deliveries: list[AttemptFence] = field(default_factory=list)
    sure_deliveries: int = 0  # of a retrying attempt nothing else touches in its round
    racing_deliveries: int = 0  # of a retrying attempt racing its outcome or a cancel
    answers: Counter[str] = field(default_factory=Counter)

    async def read(self, routes: Sequence[str]) -> list[RouteSnapshot]:
        answers = await self.call([(r, ReadSnapshot()) for r in routes])
        assert [a for a in answers if not isinstance(a, RouteSnapshot)] == []
        return answers

    async def call(self, items: list[BatchItem]) -> list[Any]:
        answers: list[Any] = await asyncio.wait_for(self.host.run_batch.remote(items), TIMEOUT_S)
        return answers

    async def send(self) -> None:
        """Everything planned, at once: the commands in BATCHES concurrent batches, each
        cancel its own call, the deliveries in a few announcements; then wait until the
        host has taken every announcement."""
        self.chooser.shuffle(self.commands)
        self.chooser.shuffle(self.deliveries)
        batches = [self.commands[i::BATCHES] for i in range(BATCHES)]
        parts = [self.deliveries[i::BATCHES] for i in range(BATCHES)]
        cancels = [self.host.cancel_transient_retry.remote(TASK, r, None) for r in self.cancels]
        results = await asyncio.wait_for(
            asyncio.gather(
                *(self.call(batch) for batch in batches if batch), *cancels,
                *(announce_delivered(self.client, self.keys, HOST, p) for p in parts if p),
            ),
            TIMEOUT_S,
        )  # fmt: skip
        for result in results:
            for answer in result if isinstance(result, list) else [result]:
                self.tally(answer)
        self.commands, self.cancels, self.deliveries = [], [], []
        last = await last_wake_id(self.client, self.keys, HOST)
        await asyncio.wait_for(self.host.wakes_followed.remote(last), TIMEOUT_S)

    def tally(self, answer: Any) -> None:
        if answer is None:  # an announcement
            return
        if isinstance(answer, RouteSnapshot):
            self.answers["applied"] += 1
        elif isinstance(answer, CancelOutcome):
            self.answers["cancel_active" if answer.active else "cancel_cleanup"] += 1
        elif isinstance(answer, TransitionRejectedError):
            self.answers["rejected"] += 1  # a late or stale event, or a race's loser
        else:
            raise AssertionError(f"the host answered {answer!r}")

    def plan(self, snapshot: RouteSnapshot) -> None:
        """One session's events of a round, chosen for its state."""
        current = snapshot.attempt
        route, generation, ordinal = current.route_id, current.generation, current.ordinal
        command: RouteCommand | None = None
        choices = {
            "active": ["fail"] * 4 + ["fail+cancel", "succeed", "stop", "close", "cancel",
                                      "late"],
            "retry_wait": ["retry"] * 4 + ["retry+cancel", "cancel", "stop", "close", "late"],
            "retrying": ["deliver"] * 3 + ["deliver_then_succeed", "deliver_then_fail",
                         "deliver_then_cancel", "succeed", "fail", "fail+cancel", "stop",
                         "close", "late"],
            "action_required": ["resume", "resume", "start_fresh", "close", "cancel", "late"],
        }.get(snapshot.state, ["late"] * 3 + ["cancel"])  # fmt: skip
        action = self.chooser.choice(choices)
        if action.endswith("+cancel"):  # the cancel races the transition and its notice
            self.cancels.append(route)
            action = action.removesuffix("+cancel")
        if action.startswith("deliver"):
            self.deliveries.append(current)
            if action == "deliver":
                self.sure_deliveries += 1
            else:
                self.racing_deliveries += 1
            action = action.removeprefix("deliver").removeprefix("_then_") or "nothing"
        if action in BY_GENERATION:
            command = BY_GENERATION[action](generation)
        elif action == "fail":  # on a retrying route: the superseding attempt
            command = failure(route, generation)
        elif action == "cancel":
            self.cancels.append(route)
        elif action == "late" and snapshot.state == "retrying":  # for the attempt before
            command = failure(route, generation, attempt=ordinal - 1)
            self.deliveries.append(AttemptFence(route, generation, ordinal - 1))
        elif action == "late":  # a report for the generation before, a delivery not due
            command = failure(route, generation - 1)
            self.deliveries.append(current)
        if command is not None:
            self.commands.append((route, command))


def failure(route: str, generation: int, *, attempt: int | None = None) -> ReportFailure:
    return ReportFailure(
        generation, transport_lost(), safe_turn(), "kanban", f"inv-{route}", attempt=attempt
    )


def transcript_history(connection: redis.Redis, keys: KeySpace) -> tuple[int, int, list[str]]:
    """From the transcript's own stream, in order: notices created and updated, and every
    `retrying: true` write for an attempt at or below one whose notice was already
    deleted in that session (a notice recreated after its retirement), or that made a
    session's second live notice."""
    created = updated = 0
    problems: list[str] = []
    shown: dict[str, Attempt] = {}  # live notice id -> the attempt it shows
    live: dict[str, set[str]] = {}  # session -> its live notice ids
    retired: dict[str, Attempt] = {}  # session -> the latest attempt a deleted notice showed
    entries: list[Any] = connection.xrange(keys.transcript)  # type: ignore[assignment]  # a sync client's reply
    for entry_id, fields in entries:
        event = decode_event(reply_text(entry_id), reply_texts(fields))
        session = event.session_id
        if event.event == "session.message.deleted":
            attempt = shown.pop(event.message_id, None)
            live.get(session, set()).discard(event.message_id)
            if attempt is not None:
                retired[session] = max(retired.get(session, attempt), attempt)
            continue
        message = event.message
        assert message is not None
        if message.metadata.get("retrying") is not True:
            continue  # a recovery message
        generation, ordinal = message.metadata["generation"], message.metadata["attempt_ordinal"]
        assert isinstance(generation, int)
        assert isinstance(ordinal, int)
        if message.id in shown:
            updated += 1
        else:
            created += 1
        if session in retired and (generation, ordinal) <= retired[session]:
            problems.append(f"{session}: attempt {(generation, ordinal)} after {retired[session]}")
        shown[message.id] = (generation, ordinal)
        live.setdefault(session, set()).add(message.id)
        if len(live[session]) > 1:
            problems.append(f"{session}: a second live notice {message.id}")
    return created, updated, problems


def test_a_thousand_sessions_churned_through_a_real_host_leave_no_notice_and_no_guard(
    redis_url: str, keys: KeySpace
) -> None:
    settings = EngineSettings(key_prefix=keys.prefix, circuit_hosts=0, transcript_maxlen=10**7)
    host: Any = RemoteRouteHost.options(num_cpus=0).remote(
        HOST, redis_url, settings, clock=ManualClock(T0)
    )
    routes = [f"churn-{n}" for n in range(SESSIONS)]
    connection = redis.Redis.from_url(redis_url, decode_responses=True)

    async def scenario() -> Churn:
        client = Redis.from_url(redis_url, decode_responses=True)
        churn = Churn(host, keys, client, random.Random(SEED))
        try:
            await asyncio.wait_for(host.ready.remote(), TIMEOUT_S)
            started = await churn.call([(r, start(r)) for r in routes])
            assert [s for s in started if not isinstance(s, RouteSnapshot)] == []
            for _ in range(ROUNDS):
                for snapshot in await churn.read(routes):
                    churn.plan(snapshot)
                await churn.send()
            for snapshot in await churn.read(routes):  # the fleet ends: every session closed
                if snapshot.state != "closed":
                    churn.commands.append((snapshot.route_id, Close(snapshot.generation)))
            await churn.send()
            await late_events(churn, await churn.read(routes))  # after every retirement
            return churn
        finally:
            await client.aclose()

    async def very_late() -> None:
        client = Redis.from_url(redis_url, decode_responses=True)
        try:
            churn = Churn(host, keys, client, random.Random(SEED))
            await late_events(churn, await churn.read(routes))
        finally:
            await client.aclose()

    try:
        churn = asyncio.run(scenario())
        counts = ray.get(host.notice_counts.remote())
        failed = {k: counts[k] for k in ("write_failures", "cleanup_failures", "recovery_failures")}
        assert failed == dict.fromkeys(failed, 0), f"the transcript port failed: {counts}"
        assert read_notices(connection, keys) == []  # zero retrying: true messages
        created, updated, problems = transcript_history(connection, keys)
        assert problems == []  # none recreated after its retirement, one per session
        assert created > SESSIONS // 4  # the churn did write notices,
        assert updated > SESSIONS // 20  # reused them for attempt N+1,
        assert churn.answers["cancel_active"] > 0  # cancelled live loops,
        assert churn.answers["rejected"] > SESSIONS  # and sent late events
        assert (counts["guards_owned"], counts["guards_past_fence"]) == (0, 0), counts
        assert counts["guards"] == SESSIONS  # each closed session's fence still stands
        delivered = counts["prompts"] - SESSIONS  # the starts are the other prompts
        assert churn.sure_deliveries <= delivered, (counts, churn.sure_deliveries)
        assert delivered <= churn.sure_deliveries + churn.racing_deliveries
        assert churn.sure_deliveries > SESSIONS // 10  # many deliveries owned their session
        past_fence = (LATE_EVENT_FENCE + timedelta(seconds=1)).total_seconds()
        assert ray.get(host.advance_clock.remote(past_fence)) == SESSIONS  # the fences ran
        counts = ray.get(host.notice_counts.remote())
        assert (counts["guards"], counts["guards_past_fence"]) == (0, 0), counts
        asyncio.run(very_late())  # past the fence, with every entry reclaimed
        counts = ray.get(host.notice_counts.remote())
        assert (counts["guards"], counts["guards_owned"]) == (0, 0), counts
        assert read_notices(connection, keys) == []
        assert transcript_history(connection, keys)[2] == []
    finally:
        connection.close()
        ray.get(host.aclose.remote())
        ray.kill(host, no_restart=True)


def start(route: str) -> Start:
    return Start(PATIENT, "kanban", f"inv-{route}", task_id=TASK)


async def late_events(churn: Churn, snapshots: Sequence[RouteSnapshot]) -> None:
    """Every session's last attempt delivered late, and a report for its generation."""
    for snapshot in snapshots:
        churn.deliveries.append(snapshot.attempt)
        churn.commands.append((snapshot.route_id, failure(snapshot.route_id, snapshot.generation)))
    await churn.send()
