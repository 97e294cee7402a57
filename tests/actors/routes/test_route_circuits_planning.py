"""Route planning against circuits (actors/routes/circuit_board.py, actors/routes/parking.py):
pure, no Redis. The circuits are a CircuitBoard of views, as a round reads them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from actors.routes.circuit_board import (
    REASON_PARKED,
    REASON_PROBE,
    REASON_RELEASED,
    CircuitBinding,
    CircuitBoard,
    candidate_key,
    covering,
    fold,
)
from actors.routes.circuit_models import CircuitView
from actors.routes.commands import (
    FireDue,
    ProbeParked,
    ReleaseParked,
    ReportFailure,
    RetryNow,
    RouteCommand,
    RouteContext,
    Start,
)
from actors.routes.models import RouteSnapshot
from actors.routes.plan import plan
from actors.store.route_codec import applied_snapshot
from circuits import (
    CircuitSettings,
    CircuitState,
    CircuitStatus,
    DenialReason,
    ProbeDenied,
    ProbeGrant,
    ResourceKey,
    machine,
)
from policy import DynamicProfile, Outcome
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import (
    candidate,
    overloaded,
    profile,
    reset_wait,
    retries,
    safe_turn,
    seed_profile,
)
from tests.circuits.builders import failure

# no reset jitter: these tests check exact open-until times (tests/circuits check it)
BINDING = CircuitBinding(
    installation_key=b"planning-test-key", settings=CircuitSettings(reset_jitter_s=0)
)
ROUTE = "route-1"


def run(snapshot: RouteSnapshot, command: RouteCommand, context: RouteContext) -> RouteSnapshot:
    transition = plan(snapshot, command, context)
    assert transition is not None, "expected a transition"
    return applied_snapshot(transition, context.now)


def patient_profile() -> DynamicProfile:
    """The seed's profile with a claude retry budget long enough to outwait a circuit's
    backoff (30 s doubling over 5 retries: 930 s), so a retry parks rather than skips."""
    return profile(
        candidate(
            "claude", transient=retries(5, 30, Outcome.SKIP), hard=reset_wait(300, Outcome.STOP)
        ),
        *seed_profile().candidates[1:],
    )


def started(route_id: str = ROUTE) -> RouteSnapshot:
    command = Start(patient_profile(), "kanban", f"inv-{route_id}")
    return run(RouteSnapshot.absent(route_id), command, RouteContext(T0))


def provider_key(snapshot: RouteSnapshot) -> ResourceKey:
    key = candidate_key(snapshot, BINDING)
    assert key is not None
    return covering(key)[0][1]  # the provider-wide circuit, coarsest first


def board(snapshot: RouteSnapshot, state: CircuitState, **kwargs: object) -> CircuitBoard:
    """The board of one round: the provider circuit in `state`, the others closed."""
    key = candidate_key(snapshot, BINDING)
    assert key is not None
    views = [CircuitView(resource=k) for _, k in covering(key)]
    views[0] = CircuitView(resource=provider_key(snapshot), state=state, parked=0)
    return CircuitBoard(BINDING, views, **kwargs)  # type: ignore[arg-type]


def opened(at: datetime = T0, for_s: float = 60) -> CircuitState:
    """Open from `at` for `for_s` seconds (a quota failure with that reset)."""
    return machine.record_failure(
        CircuitState(), failure("quota_limited", retry_after_s=for_s), "other", at,
        BINDING.settings,
    )  # fmt: skip


def report(snapshot: RouteSnapshot, at: datetime, circuits: CircuitBoard | None) -> RouteSnapshot:
    command = ReportFailure(
        snapshot.generation, overloaded(), safe_turn(), "kanban", f"inv-{snapshot.route_id}"
    )
    return run(snapshot, command, RouteContext(at, circuits=circuits))


def fire(snapshot: RouteSnapshot, at: datetime, circuits: CircuitBoard | None) -> RouteSnapshot:
    command = FireDue(snapshot.generation, snapshot.attempt_ordinal)
    return run(snapshot, command, RouteContext(at, circuits=circuits))


def test_a_retry_on_an_open_circuit_parks_with_the_same_budget_as_on_a_closed_one() -> None:
    route = started()
    free = report(route, T0, board(route, CircuitState()))
    parked = report(route, T0, board(route, opened(for_s=600)))

    assert free.state == parked.state == "retry_wait"
    assert (parked.retry_ordinal, parked.attempt_ordinal) == (free.retry_ordinal, 1)
    assert free.reason != REASON_PARKED
    assert free.circuit is None
    assert parked.reason == REASON_PARKED
    assert parked.circuit == provider_key(route).resource_id
    assert free.deadline is not None
    assert parked.deadline == T0 + timedelta(seconds=600) > free.deadline


def test_an_open_circuit_never_lets_a_due_attempt_become_retrying() -> None:
    route = report(started(), T0, board(started(), CircuitState()))
    circuit = opened(for_s=600)
    assert route.deadline is not None
    moment = route.deadline
    for _ in range(20):  # every due check while open re-parks, same attempt, no budget
        after = fire(route, moment, board(route, circuit))
        assert after.state == "retry_wait"
        assert after.reason == REASON_PARKED
        assert (after.attempt_ordinal, after.retry_ordinal) == (
            route.attempt_ordinal, route.retry_ordinal,
        )  # fmt: skip
        assert after.deadline is not None
        assert after.deadline > moment
        route, moment = after, after.deadline
    # past open-until without the probe lease (another host holds it): still parked
    late = fire(route, moment + timedelta(seconds=700), board(route, circuit))
    assert late.state == "retry_wait"


def test_retry_now_into_an_open_circuit_stays_parked() -> None:
    route = report(started(), T0, board(started(), opened(for_s=600)))
    after = run(
        route, RetryNow(route.generation), RouteContext(T0, circuits=board(route, opened()))
    )
    assert after.state == "retry_wait"
    assert after.reason == REASON_PARKED


def test_parking_consumes_no_retry_budget() -> None:
    route = report(started(), T0, board(started(), CircuitState()))
    assert route.retry_ordinal == 1
    circuit = opened(for_s=600)
    assert route.deadline is not None
    at = route.deadline
    for _ in range(5):
        route = fire(route, at, board(route, circuit))
        assert route.deadline is not None
        at = route.deadline
    dispatched = fire(route, at, board(route, CircuitState()))
    assert dispatched.state == "retrying"
    failed_again = report(dispatched, at, board(dispatched, CircuitState()))
    assert (failed_again.retry_ordinal, failed_again.attempt_ordinal) == (2, 2)


def test_the_attempt_holding_the_probe_lease_dispatches_as_the_probe() -> None:
    route = report(started(), T0, board(started(), opened(for_s=60)))
    assert route.deadline is not None
    due = route.deadline
    state, grant = machine.acquire_probe(
        opened(for_s=60), "holder-1", due, timedelta(seconds=BINDING.probe_ttl_s)
    )
    assert isinstance(grant, ProbeGrant)
    circuits = board(route, state, grants={ROUTE: (provider_key(route).resource_id, grant)})
    probe = fire(route, due, circuits)
    assert probe.state == "retrying"
    assert probe.probe_token == grant.owner_token
    assert probe.circuit == provider_key(route).resource_id
    assert probe.reason is not None
    assert probe.reason.startswith(REASON_PROBE)
    other = report(started("route-2"), due, None)
    assert fire(other, due + timedelta(seconds=30), circuits).state == "retry_wait"


def test_failures_of_one_round_open_the_circuit_for_the_routes_planned_after_them() -> None:
    routes = [started(f"route-{n}") for n in range(4)]
    circuits = board(routes[0], CircuitState())
    decided = [report(route, T0, circuits) for route in routes]
    # three transient failures from two routes open it (docs/DESIGN.md §3): the third on
    assert [d.reason == REASON_PARKED for d in decided] == [False, False, True, True]
    assert len(circuits.failures[provider_key(routes[0]).resource_id]) == 4


def test_a_route_planned_again_in_its_round_is_counted_on_the_circuit_once() -> None:
    """A loser of the fence is re-planned in the same round (actors/engine/batch.py): its
    failure must not count twice towards opening the circuit."""
    route, other = started("route-1"), started("route-2")
    circuits = board(route, CircuitState())
    for _ in range(3):  # the first plan and re-plans of the same report
        report(route, T0, circuits)
    provider = provider_key(route).resource_id
    assert [entry.route_id for entry in circuits.failures[provider]] == ["route-1"]
    assert circuits.states[provider].status is CircuitStatus.CLOSED
    report(other, T0, circuits)
    assert [entry.route_id for entry in circuits.failures[provider]] == ["route-1", "route-2"]


def refolded(circuits: CircuitBoard, resource_id: str, routes: int) -> CircuitState:
    """What the round's circuit write folds when it cannot take the board's state: the
    first `routes` failures noted on the circuit, onto the state read."""
    state = circuits.read[resource_id].state
    for entry in circuits.failures[resource_id][:routes]:
        state = fold(state, entry, T0, BINDING.settings, resource_id)
    return state


def test_the_board_hands_its_folded_failures_to_the_circuit_write_only_when_they_are_all() -> None:
    """The round's circuit write takes the state the board folded while planning (the same
    failures, in the same order, onto the same state read) instead of folding them again;
    not when a failure's transition was not written, nor after a probe verdict."""
    routes = [started(f"route-{n}") for n in range(3)]
    circuits = board(routes[0], CircuitState())
    for route in routes[:2]:
        report(route, T0, circuits)
    assert len(circuits.failures) == 2  # the model's circuit and the provider's
    for rid in circuits.failures:
        folded = circuits.failures_folded(rid, 2)
        assert folded is not None
        assert folded == refolded(circuits, rid, 2)
        assert folded != circuits.read[rid].state  # two failures are marked on it
        assert circuits.failures_folded(rid, 1) is None  # one transition not written
    unread = CircuitBoard(BINDING)
    report(routes[2], T0, unread)
    assert all(unread.failures_folded(rid, 1) is None for rid in unread.failures)


def failed_probe() -> tuple[RouteSnapshot, datetime, str, CircuitBoard]:
    """A route parked on an open circuit, fired as its probe once the backoff expired, and
    its probe's failure reported: the route after it, when it was due, the circuit and
    the board of the round that folded the verdict in."""
    parked = report(started(), T0, board(started(), opened(for_s=60)))
    assert parked.deadline is not None
    due = parked.deadline
    state, grant = machine.acquire_probe(opened(for_s=60), "h", due, timedelta(seconds=300))
    assert isinstance(grant, ProbeGrant)
    rid = provider_key(parked).resource_id
    probe = fire(parked, due, board(parked, state, grants={ROUTE: (rid, grant)}))
    circuits = board(probe, state)
    failed = report(probe, due + timedelta(seconds=1), circuits)
    assert circuits.verdicts[ROUTE][0] is False
    return failed, due, rid, circuits


def test_after_a_probe_verdict_the_circuit_write_folds_the_failures_itself() -> None:
    _, due, rid, circuits = failed_probe()
    report(started("route-2"), due + timedelta(seconds=1), circuits)
    assert circuits.failures_folded(rid, len(circuits.failures.get(rid, ()))) is None


@pytest.mark.parametrize("code", ["context_length_exceeded", "content_policy"])
def test_request_scope_failures_never_touch_circuits(code: str) -> None:
    route = started()
    circuits = board(route, CircuitState())
    command = ReportFailure(route.generation, failure(code), safe_turn(), "kanban", "inv-x")
    run(route, command, RouteContext(T0, circuits=circuits))
    assert circuits.failures == {}
    assert all(state == CircuitState() for state in circuits.states.values())


def test_a_failed_probe_reopens_the_circuit_and_its_route_parks() -> None:
    failed, due, _, _ = failed_probe()
    assert failed.reason == REASON_PARKED
    assert failed.probe_token is None
    assert failed.deadline is not None
    # the next backoff: 2 min from the failed probe
    assert failed.deadline >= due + timedelta(seconds=121)


def test_a_route_never_released_after_a_close_takes_a_hashed_wave_slot() -> None:
    route = report(started(), T0, board(started(), opened(for_s=60)))
    assert route.deadline is not None
    closed = board(route, CircuitState())
    rid = provider_key(route).resource_id
    closed.read[rid] = closed.read[rid].model_copy(update={"parked": 1000})
    slotted = fire(route, route.deadline, closed)
    assert slotted.state == "retry_wait"
    assert slotted.reason == REASON_RELEASED
    assert slotted.deadline is not None
    assert route.deadline < slotted.deadline <= route.deadline + timedelta(seconds=5)
    assert fire(slotted, slotted.deadline, closed).state == "retrying"


def test_a_release_moves_only_a_route_parked_on_that_circuit() -> None:
    route = report(started(), T0, board(started(), opened(for_s=600)))
    assert route.circuit is not None
    at = T0 + timedelta(seconds=3)
    command = ReleaseParked(route.circuit, at)
    transition = plan(route, command, RouteContext(T0))
    assert transition is not None
    assert transition.host_id is None
    assert transition.route.deadline == at
    assert transition.route.reason == REASON_RELEASED
    assert transition.attempt is None
    other = ReleaseParked("0" * 32, at)
    assert plan(route, other, RouteContext(T0)) is None


# -- an owner that wakes one parked route (circuit hosts) ---------------------------------

OWNED = CircuitBinding(
    installation_key=b"planning-test-key", settings=CircuitSettings(reset_jitter_s=0),
    owner_wake_margin_s=30.0,
)  # fmt: skip


def owned_board(snapshot: RouteSnapshot, state: CircuitState, **kwargs: object) -> CircuitBoard:
    plain = board(snapshot, state)
    return CircuitBoard(OWNED, plain.read.values(), **kwargs)  # type: ignore[arg-type]


def test_with_an_owner_that_wakes_a_prober_parked_routes_sleep_past_the_probe_time() -> None:
    route = started()
    state = opened(for_s=600)
    assert state.open_until is not None
    alone = report(route, T0, board(route, state))
    owned = report(route, T0, owned_board(route, state))
    assert alone.deadline == state.open_until
    assert owned.deadline == state.open_until + timedelta(seconds=30)
    assert owned.reason == alone.reason == REASON_PARKED


def test_a_cooling_down_denial_parks_without_the_owners_margin() -> None:
    """The owner could not be asked (or the circuit is not due yet): the route asks again
    itself at the denial's retry time, not a margin later."""
    route = report(started(), T0, owned_board(started(), opened(for_s=60)))
    assert route.deadline is not None
    assert route.circuit is not None
    retry_at = route.deadline + timedelta(seconds=1)
    denied = ProbeDenied(reason=DenialReason.COOLING_DOWN, retry_at=retry_at)
    later_board = owned_board(route, opened(for_s=60), denials={route.circuit: denied})
    again = fire(route, route.deadline, later_board)
    assert (again.state, again.deadline) == ("retry_wait", retry_at)


def test_a_probe_wake_makes_the_woken_parked_route_the_probe() -> None:
    route = report(started(), T0, owned_board(started(), opened(for_s=60)))
    assert route.circuit is not None
    at = T0 + timedelta(seconds=60)  # its probe time, 30 s before its own deadline
    grant = ProbeGrant(holder=ROUTE, owner_token="tok-1", expires_at=at + timedelta(seconds=300))
    granted = owned_board(route, opened(for_s=60), grants={ROUTE: (route.circuit, grant)})
    woken = run(route, ProbeParked(route.circuit), RouteContext(at, circuits=granted))
    assert woken.state == "retrying"
    assert woken.probe_token == "tok-1"
    assert woken.reason is not None
    assert woken.reason.startswith(REASON_PROBE)


def test_a_probe_wake_without_the_lease_parks_the_route_again_with_its_budget() -> None:
    route = report(started(), T0, owned_board(started(), opened(for_s=60)))
    assert route.circuit is not None
    at = T0 + timedelta(seconds=60)
    woken = run(route, ProbeParked(route.circuit), RouteContext(at, circuits=owned_board(
        route, opened(for_s=60))))  # fmt: skip
    assert woken.state == "retry_wait"
    assert (woken.retry_ordinal, woken.attempt_ordinal) == (route.retry_ordinal, 1)
    assert woken.deadline is not None
    assert woken.deadline >= at + timedelta(seconds=30)


def test_a_probe_wake_of_a_route_no_longer_parked_on_that_circuit_does_nothing() -> None:
    route = report(started(), T0, owned_board(started(), opened(for_s=60)))
    assert route.circuit is not None
    at = T0 + timedelta(seconds=60)
    context = RouteContext(at, circuits=owned_board(route, opened(for_s=60)))
    assert plan(route, ProbeParked("0" * 32), context) is None
    released = run(route, ReleaseParked(route.circuit, at), RouteContext(T0))
    assert plan(released, ProbeParked(route.circuit), context) is None
    assert plan(started("active-one"), ProbeParked(route.circuit), context) is None
