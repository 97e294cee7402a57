"""The planner re-validates a caller-built Classification (catalogue/boundary.py)."""

from __future__ import annotations

import pytest

from actors.routes.commands import ReportFailure, RouteContext, Start
from actors.routes.models import RouteSnapshot
from actors.routes.plan import plan
from actors.store.route_codec import applied_snapshot
from catalogue.boundary import InvalidClassificationError
from tests.actors.route_scenarios import safe_turn, seed_profile
from tests.catalogue.test_boundary import NOW, SECRET, genuine


def started() -> RouteSnapshot:
    command = Start(seed_profile(), "kanban", "inv-1")
    transition = plan(RouteSnapshot.absent("r-1"), command, RouteContext(NOW))
    assert transition is not None
    return applied_snapshot(transition, NOW)


def test_the_planner_refuses_a_forged_classification_with_no_transition() -> None:
    route = started()
    forged = genuine(rule="forged.rule.v1")
    report = ReportFailure(route.generation, forged, safe_turn(), "kanban", "inv-1")
    with pytest.raises(InvalidClassificationError):
        plan(route, report, RouteContext(NOW))


def test_the_planner_stores_a_caller_excerpt_sanitised() -> None:
    route = started()
    report = ReportFailure(
        route.generation, genuine(safe_excerpt=f"Bearer {SECRET}"), safe_turn(), "kanban", "inv-1"
    )
    transition = plan(route, report, RouteContext(NOW))
    assert transition is not None
    assert transition.attempt is not None
    assert transition.attempt.safe_excerpt == "Bearer [REDACTED]"
