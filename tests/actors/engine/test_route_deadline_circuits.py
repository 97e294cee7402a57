"""The recovery deadline with circuits, through RouteService on real Redis with a
ManualClock: a park never outlives the deadline, not even when the circuit opens again past
it, and the stopped route leaves its circuit's parked set."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import pytest

from actors.routes.circuit_board import REASON_PARKED
from actors.routes.commands import ReportFailure, Start
from actors.routes.deadline import deadline_reason
from actors.routes.models import RouteSnapshot
from circuits import CircuitStatus
from tests.actors.conftest import Backend
from tests.actors.engine.test_route_circuits import (
    RESET,
    Rig,
    circuit_of,
    dispatched,
    fire_due,
    rig,
    run_async,
)
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import overloaded, safe_turn, seed_profile, usage_limit

pytestmark = pytest.mark.integration

DEADLINE: Final = T0 + timedelta(seconds=200)


async def park(rig: Rig, *routes: tuple[str, datetime, datetime | None]) -> list[RouteSnapshot]:
    """Start each (route, reset, recovery deadline), all before any fails (a start after the
    circuit opened would run on the next candidate), then report a usage limit resetting
    at its reset: each parked on the account circuit."""
    starts = [
        (route_id, Start(seed_profile(), "kanban", f"inv-{route_id}", recovery_deadline=limit))
        for route_id, _, limit in routes
    ]
    assert all(isinstance(s, RouteSnapshot) for s in await rig.service.run_many(starts))
    reports = [
        (route_id, ReportFailure(1, usage_limit(reset), safe_turn(), "kanban", f"inv-{route_id}"))
        for route_id, reset, _ in routes
    ]
    parked = await rig.service.run_many(reports)
    assert all(isinstance(p, RouteSnapshot) and p.reason == REASON_PARKED for p in parked), parked
    return [p for p in parked if isinstance(p, RouteSnapshot)]


async def step_until(rig: Rig, end: datetime, step: timedelta = timedelta(seconds=1)) -> list[str]:
    """Fire what is due at each step up to `end`: the routes dispatched, in order."""
    sent: list[str] = []
    while rig.clock.now() < end:
        rig.clock.advance(step)
        sent += [s.route_id for s in dispatched(await fire_due(rig))]
    return sent


@run_async
async def test_a_park_past_the_deadline_stops_at_it_and_leaves_the_parked_set(
    real_backend: Backend,
) -> None:
    deadline = T0 + timedelta(seconds=60)
    async with rig(real_backend) as one:
        other, bounded = await park(
            one, ("route-other", RESET, None), ("route-deadline", RESET, deadline)
        )
        assert (bounded.deadline, bounded.pending_outcome) == (deadline, "stop")
        assert (other.deadline, other.pending_outcome) == (RESET, "retry_after_reset")
        resource = circuit_of(bounded)
        assert set(await one.circuits.parked(resource)) == {"route-other", "route-deadline"}

        assert await step_until(one, deadline) == []
        stopped = await one.service.snapshot("route-deadline")
        assert (stopped.state, stopped.next_step) == ("action_required", "manual")
        assert stopped.reason == deadline_reason(deadline)
        assert stopped.circuit is None
        assert await one.circuits.parked(resource) == ["route-other"]
        still = await one.service.snapshot("route-other")
        assert (still.state, still.deadline) == ("waiting_for_reset", RESET)


@run_async
async def test_a_circuit_that_opens_again_past_the_deadline_stops_the_route_at_it(
    real_backend: Backend,
) -> None:
    async with rig(real_backend) as one:
        # both wake at the reset; the first due (by route id at one deadline) probes
        _, bounded = await park(
            one, ("route-a-prober", RESET, None), ("route-deadline", RESET, DEADLINE)
        )
        assert (bounded.deadline, bounded.pending_outcome) == (RESET, "retry_after_reset")
        resource = circuit_of(bounded)

        assert await step_until(one, RESET) == ["route-a-prober"]
        probe = await one.service.snapshot("route-a-prober")
        one.clock.advance(timedelta(seconds=1))
        command = ReportFailure(probe.generation, overloaded(), safe_turn(), "kanban", "inv-p")
        await one.service.run_many([("route-a-prober", command)])
        view = await one.circuits.view(resource)
        assert view.status is CircuitStatus.OPEN
        assert view.open_until is not None
        assert view.open_until > DEADLINE, "the circuit now opens past the route's deadline"

        assert await step_until(one, RESET + timedelta(seconds=5)) == []
        cut = await one.service.snapshot("route-deadline")
        assert (cut.state, cut.reason, cut.deadline, cut.pending_outcome) == (
            "waiting_for_reset", REASON_PARKED, DEADLINE, "stop",
        )  # fmt: skip
        assert await step_until(one, DEADLINE - timedelta(seconds=1)) == []
        assert (await one.service.snapshot("route-deadline")).state == "waiting_for_reset"
        assert await step_until(one, DEADLINE) == []
        stopped = await one.service.snapshot("route-deadline")
        assert (stopped.state, stopped.next_step) == ("action_required", "manual")
        assert stopped.reason == deadline_reason(DEADLINE)
        history = await one.service.history("route-deadline")
        assert "deadline_reached" not in [r.decision for r in history], "never dispatched"
