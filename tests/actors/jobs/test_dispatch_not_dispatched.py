"""A dispatcher that raises NotDispatched sent nothing: the attempt goes back to the
policy as a pre-result failure of the failure the route is recovering from. It retries
with the next ordinal until the budget runs out, then skips or stops as the policy says;
a job for an attempt the route has left does nothing (integration tier: real Redis, rq
SimpleWorker in burst mode; routes built through the RouteService as production does)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.engine.service import RouteService
from actors.jobs.backstop_arming import backstop_job_id
from actors.jobs.dispatch import REASON_AMBIGUOUS, REASON_UNLOADABLE
from actors.jobs.ledger import DispatchLedger
from actors.jobs.queue import backstop_queue_name, dispatch_queue, enqueue_dispatch
from actors.jobs.worker_engine import worker_engine
from actors.keys import AttemptFence
from actors.routes.commands import ReturnUnsent
from actors.routes.dispatch_outcomes import CAUSE_NOT_DISPATCHED
from actors.routes.models import AttemptRecord, RouteSnapshot
from actors.routes.profiles import RouteProfile
from actors.store.sync_reads import read_route
from policy import Outcome
from tests.actors.conftest import Backend, raw_state
from tests.actors.fake_dispatcher import calls_key
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import (
    Session,
    candidate,
    overloaded,
    profile,
    retries,
    seed_profile,
    usage_limit,
)

pytestmark = pytest.mark.integration

R = "route-nd-1"
REFUSE = "tests.actors.fake_dispatcher:refuse"
EXPLODE = "tests.actors.fake_dispatcher:explode"
MISSING = "tests.actors.no_such_module:dispatch"
REFUSAL = "the orchestrator had no worker for this session"


@dataclass
class Rig:
    """The route service on the test's Redis (a manual clock, as a host would run it),
    and the sync side a dispatch job sees: its connection and queue."""

    backend: Backend
    connection: redis.Redis
    queue: Queue

    def run(self, scenario: Any) -> Any:
        async def main() -> Any:
            async with self.backend.store() as store:
                service = RouteService(store, self.backend.clock)
                return await scenario(Session(service, self.backend.clock, R))

        return asyncio.run(main())

    def dispatch(self, dispatcher: str, host_id: str | None = None) -> None:
        """Enqueue the dispatch of the route's retrying attempt and run it."""
        route = self.route()
        assert route.state == "retrying", route
        enqueue_dispatch(
            self.queue, self.backend.keys, AttemptFence(R, route.generation, route.attempt_ordinal),
            dispatcher=dispatcher, now=T0, host_id=host_id,
        )  # fmt: skip
        worker = SimpleWorker([self.queue], connection=self.connection, serializer=JSONSerializer)
        worker.work(burst=True, with_scheduler=True)

    def route(self) -> RouteSnapshot:
        return read_route(self.connection, self.backend.keys, R)

    def history(self) -> list[AttemptRecord]:
        return self.run(lambda session: session.service.history(R))  # type: ignore[no-any-return]

    def calls(self) -> list[tuple[int, int]]:
        raw = self.connection.lrange(calls_key(self.backend.keys.prefix), 0, -1)
        return [(call["generation"], call["ordinal"]) for call in map(json.loads, raw)]

    def ledger_outcome(self, generation: int, ordinal: int) -> str | None:
        entry = DispatchLedger(self.connection, self.backend.keys).read(
            AttemptFence(R, generation, ordinal)
        )
        return entry.fields.get("outcome")

    def last_event(self) -> dict[str, str]:
        entries: Any = self.connection.xrevrange(self.backend.keys.events, count=1)
        [(_, fields)] = entries
        return {name.decode(): value.decode() for name, value in fields.items()}


@pytest.fixture
def rig(real_backend: Backend) -> Iterator[Rig]:
    assert real_backend.url is not None
    connection = redis.Redis.from_url(real_backend.url)
    queue = dispatch_queue(connection, f"{real_backend.keys.prefix}-dispatch")
    yield Rig(real_backend, connection, queue)
    for job_id in queue.finished_job_registry.get_job_ids():
        Job.fetch(job_id, connection=connection, serializer=JSONSerializer).delete()
    queue.delete(delete_jobs=True)
    connection.close()


def retrying_after(rig: Rig, chosen: RouteProfile, evidence: Any = None) -> RouteSnapshot:
    """Start the route, report a failure, and fire its first attempt: retrying."""

    async def scenario(session: Session) -> RouteSnapshot:
        await session.start(chosen)
        await session.fail(evidence or overloaded())
        return await session.fire()

    fired: RouteSnapshot = rig.run(scenario)
    assert fired.state == "retrying", fired
    return fired


def fire(rig: Rig) -> RouteSnapshot:
    fired: RouteSnapshot = rig.run(lambda session: session.fire())
    assert fired.state == "retrying", fired
    return fired


def test_not_dispatched_schedules_the_next_retry_with_the_next_ordinal_and_its_deadline(
    rig: Rig,
) -> None:
    retrying_after(rig, seed_profile())  # 3 retries from 5 s, then skip
    before = datetime.now(UTC)
    rig.dispatch(REFUSE)
    after = datetime.now(UTC)

    route = rig.route()
    assert (route.state, route.generation, route.candidate_id) == ("retry_wait", 1, "claude")
    assert (route.retry_ordinal, route.retry_max, route.attempt_ordinal) == (2, 3, 2)
    assert (route.code, route.pending_outcome) == ("provider_overloaded", "retry")
    assert route.deadline is not None
    assert before + timedelta(seconds=10) <= route.deadline <= after + timedelta(seconds=10)
    schedules = rig.run(lambda session: session.service.schedules())
    assert [(s.route_id, s.generation, s.ordinal, s.deadline) for s in schedules] == [
        (R, 1, 2, route.deadline)
    ]
    assert rig.ledger_outcome(1, 1) == "not_dispatched"
    assert rig.calls() == [(1, 1)]
    record = rig.history()[-1]
    assert (record.decision, record.ordinal, record.code) == ("retry", 2, "provider_overloaded")
    assert REFUSAL in (record.safe_excerpt or "")
    event = rig.last_event()
    assert (event["cause"], event["from_state"], event["state"]) == (
        CAUSE_NOT_DISPATCHED, "retrying", "retry_wait"
    )  # fmt: skip


def test_repeated_not_dispatched_exhausts_the_budget_then_skips_to_the_next_candidate(
    rig: Rig,
) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(REFUSE)  # -> retry 2
    fire(rig)
    rig.dispatch(REFUSE)  # -> retry 3
    fire(rig)
    rig.dispatch(REFUSE)  # budget spent -> on_exhausted: skip

    route = rig.route()
    assert (route.state, route.generation, route.candidate_id) == ("active", 2, "codex")
    assert (route.attempt_ordinal, route.deadline) == (0, None)
    assert rig.calls() == [(1, 1), (1, 2), (1, 3)], "each attempt dispatched once"
    assert [rig.ledger_outcome(1, n) for n in (1, 2, 3)] == ["not_dispatched"] * 3
    assert rig.run(lambda session: session.service.schedules()) == []
    assert [r.decision for r in rig.history()] == [
        "start", "retry", "deadline_reached", "retry", "deadline_reached", "retry",
        "deadline_reached", "skip",
    ]  # fmt: skip


def test_not_dispatched_with_the_budget_spent_stops_when_the_policy_says_stop(rig: Rig) -> None:
    retrying_after(rig, profile(candidate("claude", transient=retries(1, 1, Outcome.STOP))))
    rig.dispatch(REFUSE)

    route = rig.route()
    assert (route.state, route.generation, route.pending_outcome) == ("action_required", 1, "stop")
    assert route.code == "provider_overloaded"
    assert rig.history()[-1].decision == "stop"
    assert rig.calls() == [(1, 1)]


def test_not_dispatched_after_a_trusted_reset_does_not_wait_again(rig: Rig) -> None:
    resets_at = T0 + timedelta(seconds=60)
    waited = retrying_after(rig, seed_profile(), usage_limit(resets_at))
    assert waited.code == "quota_limited"
    rig.dispatch(REFUSE)

    route = rig.route()
    assert (route.state, route.code, route.deadline) == ("action_required", "quota_limited", None)
    decisions = [r.decision for r in rig.history()]
    assert decisions[-3:] == ["wait_for_reset", "deadline_reached", "stop"]


def test_not_dispatched_for_an_attempt_the_route_has_left_does_nothing(rig: Rig) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(REFUSE)  # the route now waits for attempt 2
    keys = rig.backend.keys

    async def state() -> dict[str, Any]:
        client = rig.backend.raw()
        try:
            return await raw_state(client, keys, R)
        finally:
            await client.aclose()

    def return_late(fence: AttemptFence) -> RouteSnapshot:
        command = ReturnUnsent(fence.generation, fence.ordinal, "late job")
        [outcome] = worker_engine(rig.connection, keys).commands(None, [(R, command)])
        assert isinstance(outcome, RouteSnapshot), outcome
        return outcome

    before = asyncio.run(state())
    for generation, ordinal in [(1, 1), (1, 2), (2, 2), (0, 0)]:
        assert return_late(AttemptFence(R, generation, ordinal)) == read_route(
            rig.connection, keys, R
        ), "the route as it is: nothing written"
        assert asyncio.run(state()) == before
    fire(rig)
    during = asyncio.run(state())
    return_late(AttemptFence(R, 1, 1))
    assert asyncio.run(state()) == during
    assert before["attempts"] == during["attempts"][: len(before["attempts"])]


def test_other_dispatcher_exceptions_stay_ambiguous_and_require_action(rig: Rig) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(EXPLODE)

    route = rig.route()
    assert (route.state, route.reason) == ("action_required", REASON_AMBIGUOUS)
    assert route.deadline is None
    assert rig.ledger_outcome(1, 1) == "failed"
    assert rig.run(lambda session: session.service.schedules()) == []


def test_a_dispatcher_that_cannot_be_loaded_requires_action_instead_of_retrying(
    rig: Rig,
) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(MISSING)

    route = rig.route()
    assert (route.state, route.reason) == ("action_required", REASON_UNLOADABLE)
    assert rig.ledger_outcome(1, 1) == "not_dispatched"
    assert rig.run(lambda session: session.service.schedules()) == []
    assert rig.calls() == []


def test_a_wait_written_by_the_dispatch_job_gets_its_hosts_durable_backstop(rig: Rig) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(REFUSE, host_id="host-3")
    route = rig.route()
    assert route.state == "retry_wait"
    assert route.deadline is not None
    backstops = dispatch_queue(rig.connection, backstop_queue_name(rig.queue.name))
    scheduled = backstops.scheduled_job_registry.get_job_ids()
    first = int(route.deadline.timestamp())
    ids = {backstop_job_id(rig.backend.keys, "host-3", s): s for s in range(first, first + 3)}
    seconds = [second for job_id, second in ids.items() if job_id in scheduled]
    assert len(seconds) == 1, (scheduled, route.deadline)
    assert seconds[0] >= route.deadline.timestamp(), "the backstop runs after the deadline"
    for job_id in scheduled:
        Job.fetch(job_id, connection=rig.connection, serializer=JSONSerializer).delete()


def test_without_a_host_the_dispatch_job_arms_no_backstop(rig: Rig) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(REFUSE)
    assert rig.route().state == "retry_wait"
    backstops = dispatch_queue(rig.connection, backstop_queue_name(rig.queue.name))
    assert backstops.scheduled_job_registry.get_job_ids() == []
