"""A primary answering 503 for 60 s, then recovering, with one request every 4 s (issue
15's must-show), through RouteService on real Redis with a ManualClock: an orchestrator
loop starts one route per request on [primary, fallback], runs each dispatched or started
turn against a replayed provider (every answer arrives 0.5 s after the turn starts), and
fires due schedules as a host's timers would, stepping the clock 100 ms at a time.

Measured on simulated time: every request is served, the primary serves again within
30 s of recovering, and while it is down it sees at most one attempt per probe interval
once its circuit is open (the attempts before that are the first routes' own retries).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

import pytest

from actors.engine.service import RouteService
from actors.routes.commands import CompleteSwitch, FireDue, ReportFailure, ReportSuccess, Start
from actors.routes.models import RouteSnapshot
from catalogue import Evidence
from policy import DynamicProfile
from tests.actors.conftest import Backend
from tests.actors.engine.test_route_circuits import run_async
from tests.actors.engine.test_route_circuits_evidence import (
    OVERLOADED_BODY,
    issue_profile,
    one,
    openai,
    service,
)
from tests.actors.route_scenarios import safe_turn

pytestmark = pytest.mark.integration

STEP: Final = timedelta(milliseconds=100)
LATENCY: Final = timedelta(milliseconds=500)
OUTAGE_S: Final = 60.0
EVERY_S: Final = 4.0
REQUESTS: Final = 25  # 100 s of traffic: the outage and 40 s after it


@dataclass
class Fleet:
    """The orchestrator's view: turns in flight (route -> answer time, candidate) and
    what each provider model saw."""

    began: datetime
    running: dict[str, tuple[datetime, str, int]] = field(default_factory=dict)
    attempts: dict[str, list[float]] = field(default_factory=dict)
    served: dict[str, tuple[float, str]] = field(default_factory=dict)

    def at(self, moment: datetime) -> float:
        return (moment - self.began).total_seconds()

    def run(self, snapshot: RouteSnapshot, now: datetime) -> None:
        """The orchestrator launches the route's turn on its current candidate."""
        candidate = snapshot.candidate_id or ""
        self.attempts.setdefault(candidate, []).append(self.at(now))
        self.running[snapshot.route_id] = (now + LATENCY, candidate, snapshot.generation)


Provider = Callable[[Fleet, str, float], Evidence | None]
"""A replayed provider: the failure a turn on a candidate started at a time gets, or
None for a 200."""


def outage(fleet: Fleet, candidate: str, started: float) -> Evidence | None:
    """The primary answers 503 for the outage, else 200."""
    if candidate == "primary" and started < OUTAGE_S:
        return openai(503, OVERLOADED_BODY)
    return None


async def react(svc: RouteService, fleet: Fleet, snapshot: RouteSnapshot, now: datetime) -> None:
    """What the orchestrator does with a snapshot the runtime handed back."""
    if snapshot.state == "switching":
        snapshot = await one(svc, snapshot.route_id, CompleteSwitch(snapshot.generation))
    if snapshot.state in {"active", "retrying"} and snapshot.route_id not in fleet.served:
        fleet.run(snapshot, now)


async def drive(
    backend: Backend,
    shape: DynamicProfile,
    answer: Provider = outage,
    requests: int = REQUESTS,
    after_s: float = 20,
) -> Fleet:
    clock = backend.clock
    fleet = Fleet(clock.now())
    async with service(backend) as (svc, _):
        end = fleet.began + timedelta(seconds=requests * EVERY_S + after_s)
        while clock.now() < end:
            now = clock.now()
            tick = round(fleet.at(now) * 10)
            if tick % round(EVERY_S * 10) == 0 and tick // round(EVERY_S * 10) < requests:
                route_id = f"req-{tick // round(EVERY_S * 10):02d}"
                started = await one(svc, route_id, Start(shape, "kanban", "inv"))
                await react(svc, fleet, started, now)
            for route_id, (when, candidate, generation) in list(fleet.running.items()):
                if when > now:
                    continue
                del fleet.running[route_id]
                failed = answer(fleet, candidate, fleet.at(when - LATENCY))
                if failed is None:
                    done = await one(svc, route_id, ReportSuccess(generation))
                    fleet.served[route_id] = (fleet.at(now), candidate)
                    assert done.state == "active"
                    continue
                report = ReportFailure(generation, failed, safe_turn(), "kanban", "inv")
                await react(svc, fleet, await one(svc, route_id, report), now)
            due = await svc.store.due_schedules(now, 1000)
            for entry in due:
                fired = await one(svc, entry.route_id, FireDue(entry.generation, entry.ordinal))
                if fired.state == "retrying":
                    await react(svc, fleet, fired, now)
            clock.advance(STEP)
    return fleet


def check(fleet: Fleet) -> None:
    assert len(fleet.served) == REQUESTS, sorted(fleet.served)
    primary = fleet.attempts["primary"]
    recovered = min(t for t in primary if t >= OUTAGE_S)
    assert recovered <= OUTAGE_S + 30
    served_by_primary = [t for t, c in fleet.served.values() if c == "primary" and t >= OUTAGE_S]
    assert served_by_primary
    assert min(served_by_primary) <= OUTAGE_S + 30
    # once the circuit is open (after the first routes' own retries), at most one attempt
    # per probe interval: the first backoff is 60 s, so at most one more while down
    down = sorted(t for t in primary if t < OUTAGE_S)
    late = [t for t in down if t > down[0] + 10]
    assert len(late) <= 1, down


@run_async
async def test_an_outage_of_the_primary_with_the_fallback_on_the_same_provider(
    real_backend: Backend,
) -> None:
    check(await drive(real_backend, issue_profile()))


@run_async
async def test_an_outage_of_the_primary_with_the_fallback_on_another_provider(
    real_backend: Backend,
) -> None:
    shape = issue_profile()
    fallback = shape.candidates[1].model_copy(update={"provider": "other", "model": "m"})
    check(await drive(real_backend, DynamicProfile(candidates=(shape.candidates[0], fallback))))


def failing_first(*failures: Evidence) -> Provider:
    """The primary fails with `failures` in turn, then answers 200; the fallback 200."""
    left = list(failures)

    def answer(fleet: Fleet, candidate: str, started: float) -> Evidence | None:
        return left.pop(0) if candidate == "primary" and left else None

    return answer


def always(failure: Evidence) -> Provider:
    def answer(fleet: Fleet, candidate: str, started: float) -> Evidence | None:
        return failure if candidate == "primary" else None

    return answer


SERVER_ERROR: Final = openai(
    500, '{"error":{"message":"The server had an error while processing your request.",'
    '"type":"server_error","param":null,"code":null}}',
)  # fmt: skip
CONNECTION_RESET: Final = Evidence(
    kind="sdk_exception", provider="openai",
    text="openai.APIConnectionError: Connection error. (Connection reset by peer)",
)  # fmt: skip
CONTEXT: Final = openai(
    400, '{"error":{"message":"This model\'s maximum context length is 8192 tokens.",'
    '"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}',
)  # fmt: skip
RATE_NO_HINT: Final = openai(
    429, '{"error":{"message":"Rate limit reached for requests","type":"requests",'
    '"param":null,"code":"rate_limit_exceeded"}}',
)  # fmt: skip


@pytest.mark.parametrize("failure", [SERVER_ERROR, CONNECTION_RESET], ids=["500", "reset"])
def test_one_server_error_or_connection_reset_is_retried_on_the_primary_and_served(
    real_backend: Backend, failure: Evidence
) -> None:
    @run_async
    async def body() -> None:
        fleet = await drive(real_backend, issue_profile(), failing_first(failure), 1)
        assert fleet.served == {"req-00": (2.0, "primary")}  # 0.5 s answer, 1 s retry
        assert fleet.attempts == {"primary": [0.0, 1.5]}

    body()


def test_context_length_exceeded_is_served_by_the_fallback_and_never_resent(
    real_backend: Backend,
) -> None:
    @run_async
    async def body() -> None:
        fleet = await drive(real_backend, issue_profile(), failing_first(CONTEXT), 1)
        assert fleet.served == {"req-00": (1.0, "fallback")}
        assert fleet.attempts == {"primary": [0.0], "fallback": [0.5]}

    body()


@pytest.mark.parametrize("failure", [RATE_NO_HINT, openai(503, OVERLOADED_BODY)],
                         ids=["429", "503"])  # fmt: skip
def test_a_persistent_failure_gives_few_primary_attempts_then_the_fallback_serves(
    real_backend: Backend, failure: Evidence
) -> None:
    @run_async
    async def body() -> None:
        fleet = await drive(real_backend, issue_profile(), always(failure), 1, after_s=40)
        primary = fleet.attempts["primary"]
        assert len(primary) <= 6
        assert all(sum(1 for t in primary if s <= t <= s + 3) <= 4 for s in primary)
        served_at, by = fleet.served["req-00"]
        assert by == "fallback"
        assert served_at <= 40

    body()
