"""A dispatcher that raises NotDispatched sent nothing: back-pressure, not a provider
failure. The same attempt waits and is delivered again after the hint or a doubling
backoff, without spending the provider's budget, a bounded number of times, then the route
requires action; a job for an attempt the route has left does nothing (integration tier:
real Redis, rq SimpleWorker in burst mode; routes built through the RouteService as
production does)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.engine.service import RouteService
from actors.jobs.backstop_arming import backstop_job_id
from actors.jobs.dispatch import REASON_AMBIGUOUS, REASON_UNLOADABLE
from actors.jobs.ledger import DispatchLedger
from actors.jobs.queue import backstop_queue_name, dispatch_queue, enqueue_dispatch
from actors.jobs.reconcile import reconcile
from actors.jobs.rq_worker import PromptTeardownWorker
from actors.jobs.worker_engine import worker_engine
from actors.keys import AttemptFence
from actors.routes.commands import ReturnUnsent
from actors.routes.dispatch_outcomes import (
    CAUSE_NOT_DISPATCHED,
    MAX_REDELIVERIES,
    REDELIVERY_BASE_S,
)
from actors.routes.models import AttemptRecord, RouteSnapshot
from actors.routes.profiles import RouteProfile
from actors.store.sync_reads import read_route
from tests.actors.conftest import Backend, raw_state
from tests.actors.fake_dispatcher import calls_key
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import (
    Session,
    overloaded,
    seed_profile,
)

pytestmark = pytest.mark.integration

R = "route-nd-1"
REFUSE = "tests.actors.fake_dispatcher:refuse"
DELIVER = "tests.actors.fake_dispatcher:deliver"
REFUSE_WITH_HINT = "tests.actors.fake_dispatcher:refuse_with_hint"
REFUSE_ONCE = "tests.actors.fake_dispatcher:refuse_once_with_hint"
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
            dispatcher=dispatcher, now=T0, host_id=host_id, redeliveries=route.redeliveries,
        )  # fmt: skip
        worker = PromptTeardownWorker(
            [self.queue], connection=self.connection, serializer=JSONSerializer
        )
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


def test_not_dispatched_waits_to_redeliver_the_same_attempt_without_spending_the_budget(
    rig: Rig,
) -> None:
    fired = retrying_after(rig, seed_profile())  # 3 retries from 5 s, then skip
    before = datetime.now(UTC)
    rig.dispatch(REFUSE)
    after = datetime.now(UTC)

    route = rig.route()
    assert (route.state, route.generation, route.candidate_id) == ("retry_wait", 1, "claude")
    assert (route.retry_ordinal, route.retry_max, route.attempt_ordinal) == (1, 3, 1)
    assert route.cycle == fired.cycle, "the provider's budget is untouched"
    assert (route.redeliveries, route.pending_outcome, route.next_step) == (1, "retry", "wait")
    assert route.code == "provider_overloaded"
    assert route.deadline is not None
    backoff = timedelta(seconds=REDELIVERY_BASE_S)
    assert before + backoff <= route.deadline <= after + backoff
    schedules = rig.run(lambda session: session.service.schedules())
    assert [(s.route_id, s.generation, s.ordinal, s.deadline) for s in schedules] == [
        (R, 1, 1, route.deadline)
    ]
    assert rig.ledger_outcome(1, 1) == "not_dispatched"
    assert rig.calls() == [(1, 1)]
    record = rig.history()[-1]
    assert (record.decision, record.ordinal, record.code) == (
        "not_dispatched",
        1,
        "provider_overloaded",
    )
    assert REFUSAL in (record.safe_excerpt or "")
    event = rig.last_event()
    assert (event["cause"], event["from_state"], event["state"]) == (
        CAUSE_NOT_DISPATCHED, "retrying", "retry_wait"
    )  # fmt: skip


def test_a_retry_after_hint_sets_the_redelivery_deadline(rig: Rig) -> None:
    retrying_after(rig, seed_profile())
    before = datetime.now(UTC)
    rig.dispatch(REFUSE_WITH_HINT)
    after = datetime.now(UTC)

    route = rig.route()
    assert route.deadline is not None
    assert before + timedelta(seconds=3) <= route.deadline <= after + timedelta(seconds=3)
    assert "agent pool full" in (route.reason or "")


def test_the_redelivery_is_the_same_attempt_and_is_delivered_once(rig: Rig) -> None:
    fired = retrying_after(rig, seed_profile())
    rig.dispatch(REFUSE_ONCE)
    redelivered = fire(rig)
    assert (redelivered.attempt_ordinal, redelivered.redeliveries) == (1, 1)
    rig.dispatch(REFUSE_ONCE)

    route = rig.route()
    assert (route.state, route.attempt_ordinal, route.retry_ordinal) == ("retrying", 1, 1)
    assert route.cycle == fired.cycle
    assert rig.calls() == [(1, 1), (1, 1)], "one refused call, one delivered: the same attempt"
    assert rig.ledger_outcome(1, 1) == "delivered"
    entry = DispatchLedger(rig.connection, rig.backend.keys).read(AttemptFence(R, 1, 1))
    assert entry.fields["returns"] == "1"
    rig.dispatch(REFUSE_ONCE)  # a repeat of the delivered attempt: the ledger refuses it
    assert rig.calls() == [(1, 1), (1, 1)]


def test_redeliveries_are_bounded_then_the_route_requires_action(rig: Rig) -> None:
    fired = retrying_after(rig, seed_profile())
    for _ in range(MAX_REDELIVERIES):
        rig.dispatch(REFUSE)
        fire(rig)
    rig.dispatch(REFUSE)

    route = rig.route()
    assert (route.state, route.next_step, route.generation) == ("action_required", "manual", 1)
    assert f"after {MAX_REDELIVERIES} redeliveries" in (route.reason or "")
    assert route.cycle == fired.cycle
    assert rig.calls() == [(1, 1)] * (MAX_REDELIVERIES + 1)
    decisions = [r.decision for r in rig.history()]
    assert decisions.count("not_dispatched") == MAX_REDELIVERIES
    assert decisions[-1] == "stop"
    assert rig.run(lambda session: session.service.schedules()) == []


def test_the_next_attempt_starts_with_no_redeliveries(rig: Rig) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(REFUSE_ONCE)
    fire(rig)
    rig.dispatch(REFUSE_ONCE)  # delivered; the turn then fails again

    failed: RouteSnapshot = rig.run(lambda session: session.fail(overloaded()))
    assert (failed.attempt_ordinal, failed.retry_ordinal, failed.redeliveries) == (2, 2, 0)


def test_reconcile_queues_a_due_redelivery_its_host_never_enqueued(rig: Rig) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(REFUSE)
    fire(rig)  # retrying again; its host died before enqueueing the redelivery

    report = reconcile(rig.queue, rig.backend.keys, DELIVER, now=T0)
    assert report.requeued == [R]
    PromptTeardownWorker([rig.queue], connection=rig.connection, serializer=JSONSerializer).work(
        burst=True
    )
    assert rig.calls() == [(1, 1), (1, 1)]
    assert rig.ledger_outcome(1, 1) == "delivered"
    again = reconcile(rig.queue, rig.backend.keys, DELIVER, now=T0)
    assert again.requeued == []


def test_the_ledger_refuses_a_redelivery_the_route_has_not_recorded(rig: Rig) -> None:
    """A queue racing ahead of the route's own NotDispatched write (a host enqueuing the
    route it still sees retrying) must not dispatch it again at once."""
    fence = AttemptFence(R, 1, 1)
    ledger = DispatchLedger(rig.connection, rig.backend.keys)
    assert ledger.queue(fence, "job", T0) == "applied"
    assert ledger.start(fence, "w", T0) == "applied"
    assert ledger.finish(fence, "not_dispatched", T0, detail="full") == "applied"
    assert ledger.queue(fence, "job", T0, redeliveries=0) == "finished"
    assert ledger.queue(fence, "job", T0, redeliveries=2) == "finished"
    assert ledger.read(fence).awaits_redelivery(1)
    assert ledger.queue(fence, "job", T0, redeliveries=1) == "applied"
    entry = ledger.read(fence)
    assert entry.state == "queued"
    assert "outcome" not in entry.fields
    assert entry.fields["returns"] == "1"
    assert ledger.start(fence, "w", T0) == "applied"
    assert ledger.finish(fence, "delivered", T0) == "applied"
    assert ledger.queue(fence, "job", T0, redeliveries=1) == "finished", "delivered: never again"


def test_not_dispatched_for_an_attempt_the_route_has_left_does_nothing(rig: Rig) -> None:
    retrying_after(rig, seed_profile())
    rig.dispatch(REFUSE)  # the route now waits to redeliver attempt 1
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
    failed: RouteSnapshot = rig.run(lambda session: session.fail(overloaded()))
    assert (failed.state, failed.attempt_ordinal) == ("retry_wait", 2)
    during = asyncio.run(state())
    return_late(AttemptFence(R, 1, 1))  # the redelivered attempt's job, after its report
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
