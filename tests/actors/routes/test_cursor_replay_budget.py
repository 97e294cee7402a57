"""Cursor's retriable reset through the route logic: the concrete interactive policy owns
the single retry budget (no Cursor-specific counter), and agent_transport_lost never moves
the prompt to another candidate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actors.clock import ManualClock
from actors.routes.commands import ReportFailure, Start
from actors.routes.profiles import ConcreteProfile
from catalogue import Evidence, EvidenceKind
from catalogue.acp import CURSOR_DIAGNOSTIC
from tests.actors.route_drivers import fire
from tests.actors.route_scenarios import MemoryRoutes, safe_turn

ROUTE = "cursor-session"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _cursor_reset() -> Evidence:
    return Evidence(
        kind=EvidenceKind.ACP_ERROR,
        text=CURSOR_DIAGNOSTIC,
        provider="cursor-acp",
        agent="cursor-acp",
        observed_at=T0,
    )


def test_cursor_resets_use_the_single_interactive_budget_then_stop() -> None:
    routes = MemoryRoutes(ManualClock(T0))
    profile = ConcreteProfile(id="cursor", agent="cursor-acp", provider="cursor")
    routes.run(ROUTE, Start(profile, "kanban", "inv-1"))
    delays = []
    for _ in range(5):
        snapshot = routes.snapshot(ROUTE)
        report = ReportFailure(snapshot.generation, _cursor_reset(), safe_turn(), "kanban", "i")
        waiting = routes.run(ROUTE, report)
        assert waiting.state == "retry_wait"
        assert waiting.code == "agent_transport_lost"
        assert waiting.deadline is not None
        delays.append(waiting.deadline - routes.clock.now())
        fire(routes, ROUTE)
    assert delays == [timedelta(seconds=s) for s in (5, 10, 20, 40, 60)]
    snapshot = routes.snapshot(ROUTE)
    exhausted = routes.run(
        ROUTE, ReportFailure(snapshot.generation, _cursor_reset(), safe_turn(), "kanban", "i")
    )
    # The budget is spent and a transport loss never authorises a switch: stop.
    assert exhausted.state == "action_required"
    assert exhausted.generation == snapshot.generation
