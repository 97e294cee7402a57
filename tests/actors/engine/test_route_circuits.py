"""Routes parked on a shared circuit, through RouteService on real Redis with a
ManualClock: one probe, released in waves, reopened on a failed probe, a new probe after
a crashed prober, and two runtimes that never probe one resource twice at once.

A dispatch is a route's move to `retrying` (what a host then enqueues); the tests fire
the due schedules as a host's timers would, step by step on the manual clock.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, ParamSpec

import pytest

from actors.clock import ManualClock
from actors.engine.circuit_effects import CircuitEffects
from actors.engine.circuit_round import Applied, CircuitRound, LocalCircuits
from actors.engine.service import RouteService
from actors.keys import AttemptFence
from actors.routes.circuit_board import (
    REASON_PARKED,
    CircuitBinding,
    candidate_key,
    covering,
    profile_candidate_key,
)
from actors.routes.circuit_models import CircuitView
from actors.routes.commands import FireDue, ReportFailure, Start
from actors.routes.models import RouteSnapshot
from actors.store.circuit_store import CircuitStore
from circuits import (
    CircuitSettings,
    CircuitStatus,
    ProbeDenied,
    ProbeGrant,
    ResourceKey,
    wave_budget,
)
from tests.actors.conftest import Backend
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import (
    candidate,
    overloaded,
    profile,
    safe_turn,
    seed_profile,
    usage_limit,
)
from tests.circuits.builders import failure

pytestmark = pytest.mark.integration

FLEET: Final = 1000
RESET: Final = T0 + timedelta(seconds=120)
# no reset jitter: these tests step to exact reset times (tests/circuits check the jitter)
BINDING: Final = CircuitBinding(
    installation_key=b"route-circuits-test", settings=CircuitSettings(reset_jitter_s=0)
)
STEP: Final = timedelta(milliseconds=100)


P = ParamSpec("P")


def run_async(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """The async test body run in its own event loop (tests here are plain functions)."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


@dataclass
class Rig:
    """One runtime's route side: a service with its own route and circuit pools."""

    service: RouteService
    circuits: CircuitStore
    clock: ManualClock


@asynccontextmanager
async def rig(backend: Backend, clock: ManualClock | None = None) -> AsyncIterator[Rig]:
    assert backend.url is not None
    clock = clock or backend.clock
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(backend.store(events_maxlen=100))
        circuits = CircuitStore.connect(backend.url, keys=backend.keys, settings=BINDING.settings)
        stack.push_async_callback(circuits.aclose)
        effects = CircuitEffects(circuits, BINDING)
        yield Rig(RouteService(store, clock, circuits=effects), circuits, clock)


def ids(count: int = FLEET) -> list[str]:
    return [f"route-{n:04d}" for n in range(count)]


async def park_fleet(rig: Rig, count: int = FLEET) -> list[RouteSnapshot]:
    """`count` routes hit a usage limit resetting at RESET: the first failure opens the
    account circuit, every route waits for the reset parked on it."""
    service = rig.service
    started = await service.run_many(
        [(r, Start(seed_profile(), "kanban", f"inv-{r}")) for r in ids(count)]
    )
    reports = [
        (
            s.route_id,
            ReportFailure(1, usage_limit(RESET), safe_turn(), "kanban", f"inv-{s.route_id}"),
        )
        for s in started
        if isinstance(s, RouteSnapshot)
    ]
    parked = [s for s in await service.run_many(reports) if isinstance(s, RouteSnapshot)]
    assert len(parked) == count
    assert {(s.state, s.reason) for s in parked} == {("waiting_for_reset", REASON_PARKED)}
    return parked


def circuit_of(snapshot: RouteSnapshot) -> ResourceKey:
    key = candidate_key(snapshot, BINDING)
    assert key is not None
    return dict(covering(key))[snapshot.circuit or ""]


async def fire_due(rig: Rig) -> list[RouteSnapshot]:
    """What the hosts' timers do at the clock's time: fire every due schedule."""
    due = await rig.service.store.due_schedules(rig.clock.now(), 10 * FLEET)
    outcomes = await rig.service.run_many(
        [(e.route_id, FireDue(e.generation, e.ordinal)) for e in due]
    )
    assert all(isinstance(o, RouteSnapshot) for o in outcomes), outcomes
    return [o for o in outcomes if isinstance(o, RouteSnapshot)]


def dispatched(snapshots: Sequence[RouteSnapshot]) -> list[RouteSnapshot]:
    return [s for s in snapshots if s.state == "retrying"]


async def probe_at_reset(rig: Rig) -> RouteSnapshot:
    rig.clock.set(RESET)
    (probe,) = dispatched(await fire_due(rig))
    assert probe.probe_token is not None
    return probe


async def run_until(rig: Rig, end: datetime) -> dict[str, datetime]:
    """Step the clock to `end`, firing what is due at each step; dispatch time by route."""
    times: dict[str, datetime] = {}
    while rig.clock.now() < end:
        rig.clock.advance(STEP)
        for snapshot in dispatched(await fire_due(rig)):
            assert snapshot.route_id not in times, f"{snapshot.route_id} dispatched twice"
            times[snapshot.route_id] = rig.clock.now()
    return times


@run_async
async def test_a_thousand_parked_routes_get_one_probe_then_waves_within_the_budget(
    real_backend: Backend,
) -> None:
    async with rig(real_backend) as one:
        fleet = await park_fleet(one)
        resource = circuit_of(fleet[0])
        parked_view = await one.circuits.view(resource)
        assert parked_view.parked == FLEET
        assert parked_view.version == 1, "a round's thousand failures are one circuit write"
        probe = await probe_at_reset(one)
        closed_at = one.clock.advance(timedelta(seconds=2))
        await one.service.report_success(probe.route_id, probe.generation)
        assert (await one.circuits.view(resource)).status is CircuitStatus.CLOSED
        times = await run_until(one, closed_at + timedelta(seconds=12))

        others = FLEET - 1
        assert set(times) == set(ids()) - {probe.route_id}
        budget = wave_budget(others)
        per_second: dict[int, int] = {}
        for moment in times.values():
            second = math.floor((moment - closed_at).total_seconds() - 1e-9)
            per_second[second] = per_second.get(second, 0) + 1
        assert max(per_second.values()) <= budget
        # evenly spaced with 10 % headroom (circuits/release.py)
        assert len(per_second) == math.ceil(others * 1.1 / budget)
        assert await one.circuits.parked(resource) == []


@run_async
async def test_a_failed_probe_reopens_with_the_next_backoff_and_nothing_else_dispatches(
    real_backend: Backend,
) -> None:
    async with rig(real_backend) as one:
        fleet = await park_fleet(one)
        resource = circuit_of(fleet[0])
        probe = await probe_at_reset(one)
        failed_at = one.clock.advance(timedelta(seconds=1))
        command = ReportFailure(probe.generation, overloaded(), safe_turn(), "kanban", "inv-x")
        (after,) = await one.service.run_many([(probe.route_id, command)])
        view = await one.circuits.view(resource)
        assert view.status is CircuitStatus.OPEN
        assert view.open_until == failed_at + timedelta(seconds=120)  # 1 min, doubled
        assert isinstance(after, RouteSnapshot)
        # its retries (5, 10, 20 s) would end before the 2 min backoff: it moves on
        assert (after.state, after.candidate_id) == ("active", "codex")
        # until the backoff has passed, nothing dispatches
        assert await run_until(one, failed_at + timedelta(seconds=119)) == {}
        # the parked fleet wakes when the failed probe's lease would have ended (the
        # denial it was given), and exactly one of them probes
        lease_end = RESET + timedelta(seconds=BINDING.probe_ttl_s)
        one.clock.set(lease_end - STEP)
        assert dispatched(await fire_due(one)) == []
        more = await run_until(one, lease_end + timedelta(seconds=2))
        assert len(more) == 1
        assert (await one.circuits.view(resource)).status is CircuitStatus.HALF_OPEN


@run_async
async def test_a_crashed_prober_lease_expires_and_exactly_one_new_probe_happens(
    real_backend: Backend,
) -> None:
    async with rig(real_backend) as one:
        fleet = await park_fleet(one)
        resource = circuit_of(fleet[0])
        dead = await probe_at_reset(one)  # never reports: its process died
        expiry = RESET + timedelta(seconds=BINDING.probe_ttl_s)
        assert await run_until(one, expiry - STEP) == {}
        new = await run_until(one, expiry + timedelta(seconds=2))
        assert len(new) == 1
        assert dead.route_id not in new
        view = await one.circuits.view(resource)
        assert view.probe_holder is not None
        assert view.probe_holder.startswith(next(iter(new)))
        # the dead prober's late success is ignored: the circuit stays half-open
        await one.service.report_success(dead.route_id, dead.generation)
        assert (await one.circuits.view(resource)).status is CircuitStatus.HALF_OPEN


@run_async
async def test_two_runtimes_on_one_redis_never_probe_one_resource_twice_at_once(
    real_backend: Backend,
) -> None:
    clock = real_backend.clock
    async with rig(real_backend, clock) as first, rig(real_backend, clock) as second:
        fleet = await park_fleet(first, 200)
        resource = circuit_of(fleet[0])
        clock.set(RESET)
        due = await first.service.store.due_schedules(clock.now(), 1000)
        fires = [(e.route_id, FireDue(e.generation, e.ordinal)) for e in due]
        half = len(fires) // 2
        # each runtime fires every schedule (its own timers and the other's backstop),
        # in two concurrent batches and one by one, all at once
        answers = await asyncio.gather(
            first.service.run_many(fires[:half]),
            second.service.run_many(fires[half:]),
            *(
                first.service.fire_due(AttemptFence(r, c.generation, c.ordinal))
                for r, c in fires[::7]
            ),
            *(
                second.service.fire_due(AttemptFence(r, c.generation, c.ordinal))
                for r, c in fires[3::7]
            ),
        )
        snapshots = await first.service.store.snapshots([r for r, _ in fires])
        probes = [s for s in snapshots if s.state == "retrying"]
        assert len(probes) == 1
        assert probes[0].probe_token is not None
        view: CircuitView = await second.circuits.view(resource)
        assert view.status is CircuitStatus.HALF_OPEN
        assert view.state.lease is not None
        assert view.state.lease.owner_token == probes[0].probe_token
        assert len(answers) > 2


@run_async
async def test_a_skip_through_the_service_passes_over_a_candidate_open_in_redis(
    real_backend: Backend,
) -> None:
    shape = profile(candidate("claude"), candidate("codex"), candidate("gemini"))
    codex = profile_candidate_key(shape, "codex", BINDING)
    assert codex is not None
    async with rig(real_backend) as one:
        quota = failure("quota_limited", retry_after_s=600)
        await one.circuits.record_failure(codex, quota, "elsewhere", T0)
        reads: list[int] = []
        views = one.circuits.views

        async def counted(resources: Sequence[ResourceKey]) -> list[CircuitView]:
            reads.append(len(resources))
            return await views(resources)

        apart = one.circuits._views_apart

        async def counted_apart(resources: Sequence[ResourceKey]) -> list[Any]:
            reads.append(len(resources))
            return await apart(resources)

        one.circuits.views = counted  # type: ignore[method-assign]
        one.circuits._views_apart = counted_apart  # type: ignore[method-assign]
        (route,) = await one.service.run_many([("route-a", Start(shape, "kanban", "inv-a"))])
        assert isinstance(route, RouteSnapshot)
        assert route.candidate_id == "claude"
        report = ReportFailure(1, overloaded(), safe_turn(), "kanban", "inv-a")
        (after,) = await one.service.run_many([("route-a", report)])
        assert isinstance(after, RouteSnapshot)
        assert (after.state, after.candidate_id, after.generation) == ("active", "gemini", 2)
        # one read per round, covering every candidate a start or a skip could choose;
        # then the failure's compare-and-sets read claude's model circuit and the
        # provider-wide one its models' failures feed (circuits.failure_targets), both in
        # one pipeline
        every = 3 * len(covering(codex))
        assert reads == [every, every, 2]


class GatedCircuitHost:
    """A remote owner's port (as a circuit host's): it writes each round with its own
    LocalCircuits, but only once the test opens the gate."""

    remote = True

    def __init__(self, circuits: CircuitStore) -> None:
        self.local = LocalCircuits(circuits)
        self.gate = asyncio.Event()
        self.arrived = asyncio.Event()

    async def acquire_probe(
        self, resource: ResourceKey, holder: str, now: datetime, ttl_s: float
    ) -> ProbeGrant | ProbeDenied:
        return await self.local.acquire_probe(resource, holder, now, ttl_s)

    async def apply_round(self, round_: CircuitRound) -> Applied:
        self.arrived.set()
        await self.gate.wait()
        return await self.local.apply_round(round_)


@dataclass
class GatedRig:
    """A route service whose circuits' owner is a GatedCircuitHost."""

    service: RouteService
    effects: CircuitEffects
    host: GatedCircuitHost
    circuits: CircuitStore


@asynccontextmanager
async def gated(backend: Backend, binding: CircuitBinding) -> AsyncIterator[GatedRig]:
    assert backend.url is not None
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(backend.store(events_maxlen=100))
        circuits = CircuitStore.connect(backend.url, keys=backend.keys, settings=binding.settings)
        stack.push_async_callback(circuits.aclose)
        host = GatedCircuitHost(circuits)
        effects = CircuitEffects(circuits, binding, port=host)
        yield GatedRig(
            RouteService(store, backend.clock, circuits=effects), effects, host, circuits
        )


def failing(route_id: str) -> tuple[str, ReportFailure]:
    return route_id, ReportFailure(1, overloaded(), safe_turn(), "kanban", f"inv-{route_id}")


@run_async
async def test_a_remote_owner_gets_the_round_after_the_answer_and_the_next_read_waits_for_it(
    real_backend: Backend,
) -> None:
    binding = CircuitBinding(  # two transient failures from two routes open a circuit
        installation_key=b"route-circuits-test",
        settings=CircuitSettings(reset_jitter_s=0, transient_threshold=2),
    )
    async with gated(real_backend, binding) as one:
        service, host, circuits = one.service, one.host, one.circuits
        shared = seed_profile()
        await service.run_many([(r, Start(shared, "kanban", f"inv-{r}")) for r in "ab"])
        first = profile_candidate_key(shared, shared.candidates[0].id, binding)
        assert first is not None
        resources = [key for _, key in covering(first)]
        (a,) = await service.run_many([failing("a")])  # answered, its circuit round not written
        assert isinstance(a, RouteSnapshot)
        assert (a.state, a.circuit) == ("retry_wait", None)
        await host.arrived.wait()
        assert {view.version for view in await circuits.views(resources)} == {0}
        second = asyncio.create_task(service.run_many([failing("b")]))
        _, waiting = await asyncio.wait({second}, timeout=0.5)
        assert waiting == {second}  # its round reads the circuits after a's round lands
        host.gate.set()
        (b,) = await second
        assert isinstance(b, RouteSnapshot)
        assert b.reason is not None
        # b's failure is the second one on a board that has a's: it opens the circuit,
        # too long a wait for its policy, so it moved on to its next candidate
        assert "is open until" in b.reason
        assert (b.generation, b.candidate_id) == (2, shared.candidates[1].id)
        await one.effects.sends.drain()
        assert CircuitStatus.OPEN in {view.status for view in await circuits.views(resources)}
        assert len(one.effects.sends) == 0


@run_async
async def test_with_too_many_rounds_on_their_way_a_report_waits_for_its_own(
    real_backend: Backend,
) -> None:
    async with gated(real_backend, BINDING) as one:
        one.effects.sends.max_in_flight = 0  # always full: every sender waits
        await one.service.run_many([("a", Start(seed_profile(), "kanban", "inv-a"))])
        report = asyncio.create_task(one.service.run_many([failing("a")]))
        _, waiting = await asyncio.wait({report}, timeout=0.5)
        assert waiting == {report}  # held until its circuit round lands
        one.host.gate.set()
        (a,) = await report
        assert isinstance(a, RouteSnapshot)
        assert (a.state, len(one.effects.sends)) == ("retry_wait", 0)
