"""`caller` is any name; the utility semantics are a flag (docs/CONTRACTS.md, Routes). Pure
tier: the planner over MemoryRoutes."""

from __future__ import annotations

import pytest

from actors.clock import ManualClock
from actors.errors import InvalidIdentifierError
from actors.routes.commands import DAY_S, ReportFailure, Start
from tests.actors.route_builders import T0
from tests.actors.route_drivers import R
from tests.actors.route_scenarios import MemoryRoutes, overloaded, safe_turn, seed_profile


@pytest.fixture
def routes() -> MemoryRoutes:
    return MemoryRoutes(ManualClock(T0))


@pytest.mark.parametrize("caller", ["kanban", "office", "ci", "my-orchestrator.v2", "x" * 128])
def test_any_caller_name_of_an_ids_shape_is_recorded(routes: MemoryRoutes, caller: str) -> None:
    started = routes.run(R, Start(seed_profile(), caller, "inv-1"))
    assert (started.caller, started.utility) == (caller, False)
    assert routes.applied[-1].expire_after_s is None, "an ordinary route never expires"


@pytest.mark.parametrize("caller", ["", "has space", "x" * 129, "a:b", "ünïcode", 7])
def test_a_bad_caller_is_refused_naming_it_and_nothing_is_written(
    routes: MemoryRoutes, caller: object
) -> None:
    with pytest.raises(InvalidIdentifierError) as caught:
        routes.run(R, Start(seed_profile(), caller, "inv-1"))  # type: ignore[arg-type]  # the bad value is the point
    assert caught.value.kind == "caller"
    assert "caller" in str(caught.value)
    assert routes.applied == []


def test_a_bad_caller_on_a_report_is_refused_before_anything_is_decided(
    routes: MemoryRoutes,
) -> None:
    routes.run(R, Start(seed_profile(), "kanban", "inv-1"))
    with pytest.raises(InvalidIdentifierError):
        routes.run(R, ReportFailure(1, overloaded(), safe_turn(), "bad caller", "inv-1"))
    assert len(routes.applied) == 1


@pytest.mark.parametrize(("caller", "flag"), [("ci", True), ("utility", False)])
def test_the_utility_flag_or_the_old_name_makes_an_ephemeral_single_invocation_route(
    routes: MemoryRoutes, caller: str, flag: bool
) -> None:
    started = routes.run(R, Start(seed_profile(), caller, "inv-1", utility=flag))
    assert started.utility is True
    assert routes.applied[-1].expire_after_s == DAY_S
    foreign = routes.run(R, ReportFailure(1, overloaded(), safe_turn(), caller, "inv-2"))
    assert foreign.invocation_id == "inv-1", "another invocation's report is not adopted"
    assert foreign.state == "action_required", "stale evidence stops (policy: stale)"


def test_a_utility_report_makes_the_route_a_utility_one(routes: MemoryRoutes) -> None:
    routes.run(R, Start(seed_profile(), "workflow", "inv-1"))
    after = routes.run(
        R, ReportFailure(1, overloaded(), safe_turn(), "workflow", "inv-1", utility=True)
    )
    assert after.utility is True
    assert routes.applied[-1].expire_after_s is not None
