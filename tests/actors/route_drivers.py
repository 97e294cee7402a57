"""Drivers for route-logic tests: the pure tier (MemoryRoutes) and the service tier
(RouteService on a test backend)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from actors.engine.service import RouteService
from actors.routes.commands import FireDue, ReportFailure, Start
from actors.routes.models import RouteSnapshot
from catalogue import Evidence
from policy import TurnEvidence
from tests.actors.conftest import Backend
from tests.actors.route_scenarios import MemoryRoutes, safe_turn, seed_profile

R = "route-1"


def started(routes: MemoryRoutes, route_id: str = R, caller: str = "kanban") -> None:
    routes.run(route_id, Start(seed_profile(), caller, f"inv-{route_id}"))


def fail(
    routes: MemoryRoutes,
    evidence: Evidence,
    *,
    turn: TurnEvidence | None = None,
    route_id: str = R,
    caller: str = "kanban",
) -> RouteSnapshot:
    generation = routes.snapshot(route_id).generation
    report = ReportFailure(generation, evidence, turn or safe_turn(), caller, f"inv-{route_id}")
    return routes.run(route_id, report)


def fire(routes: MemoryRoutes, route_id: str = R) -> RouteSnapshot:
    """Advance the clock to the pending deadline and fire that attempt's timer."""
    pending = routes.snapshot(route_id)
    assert pending.deadline is not None
    routes.clock.set(pending.deadline)
    return routes.run(route_id, FireDue(pending.generation, pending.attempt_ordinal))


Scenario = Callable[[RouteService], Awaitable[None]]


def run_service(backend: Backend, scenario: Scenario) -> None:
    """Run `scenario` with a RouteService on `backend`'s store and clock."""

    async def main() -> None:
        async with backend.store() as store:
            await scenario(RouteService(store, backend.clock))

    asyncio.run(main())
