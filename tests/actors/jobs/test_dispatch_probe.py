"""A probe's dispatch job and its circuit lease (actors/jobs/dispatch.py and
actors/routes/dispatch_outcomes.py):
a probe that was not sent (NotDispatched, an unloadable dispatcher) abandons its lease at
once, and the re-evaluation plans with the circuits (it parks on the reopened circuit and
joins its parked set); an ambiguous probe leaves the lease to its TTL. Integration tier:
real Redis, a RouteService with circuits, rq SimpleWorker in burst mode."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.engine.circuit_effects import CircuitEffects
from actors.engine.service import RouteService
from actors.engine.settings import circuit_binding
from actors.jobs.dispatch import REASON_AMBIGUOUS
from actors.jobs.queue import dispatch_queue, enqueue_dispatch
from actors.jobs.rq_worker import PromptTeardownWorker
from actors.keys import AttemptFence
from actors.routes.circuit_board import REASON_PARKED, candidate_key, covering
from actors.routes.circuit_models import CircuitView
from actors.routes.models import RouteSnapshot
from actors.store.circuit_store import CircuitStore
from actors.store.sync_reads import read_route
from circuits import CircuitStatus, ResourceKey
from policy import Outcome, RetryPolicy
from tests.actors.conftest import Backend
from tests.actors.fake_dispatcher import calls_key
from tests.actors.route_scenarios import Session, candidate, profile, reset_wait, usage_limit

pytestmark = pytest.mark.integration

R = "route-probe-1"
REFUSE = "tests.actors.fake_dispatcher:refuse"
EXPLODE = "tests.actors.fake_dispatcher:explode"
MISSING = "tests.actors.no_such_module:dispatch"
BINDING = circuit_binding()  # the one the dispatch job uses (RECOVERY_INSTALLATION_KEY)
# claude waits for a reset up to 5 min, then retries (30, 60, 120 s): a re-evaluated
# attempt retries, and parks on the circuit within those 210 s
RETRIES = RetryPolicy(enabled=True, max_retries=3, initial_interval_seconds=30)
WAITS_THEN_RETRIES = profile(
    candidate("claude", hard=reset_wait(300, Outcome.STOP, retry=RETRIES)),
)


@dataclass
class Rig:
    backend: Backend
    connection: redis.Redis

    def run(self, scenario: Callable[[Session, CircuitStore], Coroutine[Any, Any, Any]]) -> Any:
        url = self.backend.url
        assert url is not None

        async def main() -> Any:
            async with (
                self.backend.store() as store,
                CircuitStore.connect(url, keys=self.backend.keys) as circuits,
            ):
                effects = CircuitEffects(circuits, BINDING)
                service = RouteService(store, self.backend.clock, circuits=effects)
                return await scenario(Session(service, self.backend.clock, R), circuits)

        return asyncio.run(main())

    def dispatch(self, dispatcher: str) -> None:
        route = read_route(self.connection, self.backend.keys, R)
        assert route.state == "retrying", route
        queue = dispatch_queue(self.connection, f"{self.backend.keys.prefix}-dispatch")
        enqueue_dispatch(
            queue, self.backend.keys, AttemptFence(R, route.generation, route.attempt_ordinal),
            dispatcher=dispatcher, now=self.backend.clock.now(),
        )  # fmt: skip
        PromptTeardownWorker([queue], connection=self.connection, serializer=JSONSerializer).work(
            burst=True, with_scheduler=True
        )
        for job_id in queue.finished_job_registry.get_job_ids():
            Job.fetch(job_id, connection=self.connection, serializer=JSONSerializer).delete()
        queue.delete(delete_jobs=True)

    def view(self, resource: ResourceKey) -> CircuitView:
        async def read(_: Session, circuits: CircuitStore) -> CircuitView:
            return await circuits.view(resource)

        found: CircuitView = self.run(read)
        return found

    def calls(self) -> int:
        return int(self.connection.llen(calls_key(self.backend.keys.prefix)))


@pytest.fixture
def rig(real_backend: Backend) -> Iterator[Rig]:
    assert real_backend.url is not None
    # the dispatch job reads the wall clock: the scenario runs on it too
    real_backend.clock.set(datetime.now(UTC))
    connection = redis.Redis.from_url(real_backend.url)
    yield Rig(real_backend, connection)
    connection.close()


def probing(rig: Rig) -> tuple[RouteSnapshot, ResourceKey]:
    """The route hits a usage limit (opening its account circuit), parks until the
    reset, and at the reset takes the probe lease: retrying as the probe."""

    async def scenario(session: Session, _: CircuitStore) -> RouteSnapshot:
        await session.start(WAITS_THEN_RETRIES)
        reset = session.clock.now() + timedelta(seconds=90)
        parked = await session.fail(usage_limit(reset))
        assert parked.reason == REASON_PARKED, parked
        return await session.fire()

    probe: RouteSnapshot = rig.run(scenario)
    assert (probe.state, probe.probe_token is not None) == ("retrying", True), probe
    key = candidate_key(probe, BINDING)
    assert key is not None
    resource = dict(covering(key))[probe.circuit or ""]
    assert rig.view(resource).status is CircuitStatus.HALF_OPEN
    return probe, resource


def test_a_probe_not_dispatched_abandons_its_lease_and_parks_on_the_circuit(rig: Rig) -> None:
    probe, resource = probing(rig)
    rig.dispatch(REFUSE)

    view = rig.view(resource)
    assert view.state.lease is None, "the lease ends at once, not at its TTL"
    assert view.status is CircuitStatus.OPEN
    assert view.open_until is not None
    assert view.open_until <= datetime.now(UTC)  # the next caller may probe now
    assert view.state.failed_probes == 0, "an unsent probe is no failed probe"
    route = read_route(rig.connection, rig.backend.keys, R)
    assert (route.state, route.reason, route.circuit) == (
        "retry_wait", REASON_PARKED, resource.resource_id,
    )  # fmt: skip
    assert route.probe_token is None
    assert (route.attempt_ordinal, route.redeliveries) == (probe.attempt_ordinal, 1)
    assert route.retry_ordinal == probe.retry_ordinal, "no budget spent"
    assert view.parked == 1, "the redelivery joins the circuit's parked set"
    assert rig.calls() == 1


def test_a_probe_whose_dispatcher_cannot_be_loaded_abandons_its_lease(rig: Rig) -> None:
    _, resource = probing(rig)
    rig.dispatch(MISSING)
    assert rig.view(resource).state.lease is None
    assert read_route(rig.connection, rig.backend.keys, R).state == "action_required"
    assert rig.calls() == 0


def test_an_ambiguous_probe_leaves_its_lease_to_its_ttl(rig: Rig) -> None:
    probe, resource = probing(rig)
    rig.dispatch(EXPLODE)
    view = rig.view(resource)
    assert view.status is CircuitStatus.HALF_OPEN
    assert view.state.lease is not None
    assert view.state.lease.owner_token == probe.probe_token
    route = read_route(rig.connection, rig.backend.keys, R)
    assert (route.state, route.reason) == ("action_required", REASON_AMBIGUOUS)
    assert rig.calls() == 1
