"""Circuits as an eligibility input (actors/routes/eligibility.py): a skip or a start
takes a candidate whose circuit is closed; a skip with every remaining candidate open
parks on one within its policy or stops; a park beyond the decision's own horizon gives
the policy's on_exhausted. Pure: a CircuitBoard of views, no Redis."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import pytest

from actors.routes.circuit_board import REASON_PARKED, CircuitBinding, CircuitBoard, covering
from actors.routes.circuit_board import profile_candidate_key as key_of
from actors.routes.circuit_models import CircuitView
from actors.routes.commands import (
    FireDue,
    ReportFailure,
    RouteCommand,
    RouteContext,
    SkipNow,
    Start,
    StartFresh,
    StopRoute,
)
from actors.routes.eligibility import hold_seconds
from actors.routes.models import RouteSnapshot
from actors.routes.plan import plan
from actors.routes.profiles import candidates_of
from actors.store.route_codec import applied_snapshot
from catalogue import Evidence
from circuits import CircuitSettings, CircuitState, ProbeGrant, ResourceKey, machine
from policy import POLICY_CLASSES, ClassPolicy, DynamicProfile, Outcome
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import (
    candidate,
    immediately,
    overloaded,
    profile,
    reset_wait,
    retries,
    safe_turn,
    usage_limit,
)
from tests.circuits.builders import failure

# no reset jitter: these tests check exact open-until times (tests/circuits check it)
BINDING = CircuitBinding(
    installation_key=b"eligibility-test-key", settings=CircuitSettings(reset_jitter_s=0)
)
ROUTE = "route-1"


def trio(codex: ClassPolicy | None = None, *, claude: ClassPolicy | None = None) -> DynamicProfile:
    """claude, codex, gemini; claude and gemini skip at once unless told otherwise."""
    return profile(
        candidate("claude", transient=claude, hard=claude),
        candidate("codex", transient=codex, hard=codex),
        candidate("gemini"),
    )


def provider_circuit(shape: DynamicProfile, candidate_id: str) -> ResourceKey:
    key = key_of(shape, candidate_id, BINDING)
    assert key is not None
    return covering(key)[0][1]


def board(shape: DynamicProfile, states: Mapping[str, CircuitState], **kw: object) -> CircuitBoard:
    """Every candidate's circuits closed but the provider circuits of `states`."""
    views: dict[str, CircuitView] = {}
    for c in shape.candidates:
        key = key_of(shape, c.id, BINDING)
        assert key is not None
        views |= {rid: CircuitView(resource=k) for rid, k in covering(key)}
    for candidate_id, state in states.items():
        resource = provider_circuit(shape, candidate_id)
        views[resource.resource_id] = CircuitView(resource=resource, state=state)
    return CircuitBoard(BINDING, views.values(), **kw)  # type: ignore[arg-type]


def opened(for_s: float, at: datetime = T0) -> CircuitState:
    """Open from `at` until at + max(60 s backoff, `for_s`)."""
    quota = failure("quota_limited", retry_after_s=for_s)
    return machine.record_failure(CircuitState(), quota, "other", at, BINDING.settings)


def run(snapshot: RouteSnapshot, command: RouteCommand, context: RouteContext) -> RouteSnapshot:
    transition = plan(snapshot, command, context)
    assert transition is not None, "expected a transition"
    return applied_snapshot(transition, context.now)


def started(shape: DynamicProfile, circuits: CircuitBoard | None = None) -> RouteSnapshot:
    command = Start(shape, "kanban", f"inv-{ROUTE}")
    return run(RouteSnapshot.absent(ROUTE), command, RouteContext(T0, circuits=circuits))


def failed(
    route: RouteSnapshot, circuits: CircuitBoard | None, evidence: Evidence | None = None
) -> RouteSnapshot:
    command = ReportFailure(
        route.generation, evidence or overloaded(), safe_turn(), "kanban", f"inv-{ROUTE}"
    )
    return run(route, command, RouteContext(T0, circuits=circuits))


def test_a_skip_runs_on_the_next_candidate_whose_circuit_is_closed() -> None:
    shape = trio()
    route = started(shape)
    after = failed(route, board(shape, {"codex": opened(600)}))
    assert (after.state, after.candidate_id, after.generation) == ("switching", "gemini", 2)
    assert after.circuit is None
    without = failed(route, board(shape, {}))
    assert without.candidate_id == "codex"


def test_a_skip_now_passes_over_an_open_candidate_too() -> None:
    shape = trio(claude=retries(3, 5, Outcome.SKIP))
    waiting = failed(started(shape), board(shape, {}))
    assert waiting.state == "retry_wait"
    context = RouteContext(T0, circuits=board(shape, {"codex": opened(600)}))
    skipped = run(waiting, SkipNow(waiting.generation), context)
    assert skipped.candidate_id == "gemini"


def test_a_skip_with_every_remaining_candidate_open_parks_on_one_whose_policy_waits() -> None:
    shape = trio(codex=reset_wait(300, Outcome.STOP))  # codex holds a failure up to 5 min
    circuits = board(shape, {"codex": opened(120), "gemini": opened(120)})
    parked = failed(started(shape), circuits)
    codex_circuit = provider_circuit(shape, "codex").resource_id
    assert (parked.state, parked.candidate_id, parked.generation) == ("retry_wait", "codex", 2)
    assert (parked.reason, parked.circuit) == (REASON_PARKED, codex_circuit)
    assert parked.deadline == T0 + timedelta(seconds=120)
    assert (parked.attempt_ordinal, parked.retry_ordinal) == (0, 0)
    assert parked.cycle.skipped == ("claude",)
    # its first attempt on codex meets the gate: the probe when the round holds the lease
    due = parked.deadline
    state, grant = machine.acquire_probe(opened(120), "h", due, timedelta(seconds=300))
    assert isinstance(grant, ProbeGrant)
    holding = board(shape, {"codex": state}, grants={ROUTE: (codex_circuit, grant)})
    probe = run(parked, FireDue(2, 0), RouteContext(due, circuits=holding))
    assert (probe.state, probe.probe_token) == ("retrying", grant.owner_token)
    assert probe.reason is not None
    assert "first attempt on codex" in probe.reason


def test_a_skip_with_every_remaining_candidate_open_beyond_its_policy_stops() -> None:
    shape = trio()  # nobody waits: immediately skip everywhere
    circuits = board(shape, {"codex": opened(120), "gemini": opened(120)})
    stopped = failed(started(shape), circuits)
    assert (stopped.state, stopped.generation, stopped.candidate_id) == (
        "action_required", 1, "claude",
    )  # fmt: skip
    assert stopped.reason is not None
    assert "circuit is open longer than its policy waits" in stopped.reason
    assert provider_circuit(shape, "gemini").resource_id in stopped.reason


def test_a_reset_wait_on_a_circuit_open_beyond_its_max_wait_takes_on_exhausted() -> None:
    shape = trio(claude=reset_wait(300, Outcome.SKIP))
    reset = T0 + timedelta(seconds=120)
    within = failed(started(shape), board(shape, {"claude": opened(240)}), usage_limit(reset))
    assert (within.state, within.reason) == ("waiting_for_reset", REASON_PARKED)
    assert within.deadline == T0 + timedelta(seconds=240)
    beyond = failed(started(shape), board(shape, {"claude": opened(3600)}), usage_limit(reset))
    assert (beyond.state, beyond.candidate_id) == ("switching", "codex")
    history_reason = beyond.reason or ""
    assert "codex" in history_reason
    assert beyond.cycle.skipped == ("claude",)


def test_a_reset_wait_beyond_max_wait_stops_when_the_policy_stops() -> None:
    shape = trio(claude=reset_wait(300, Outcome.STOP))
    reset = T0 + timedelta(seconds=120)
    stopped = failed(started(shape), board(shape, {"claude": opened(3600)}), usage_limit(reset))
    assert stopped.state == "action_required"
    assert stopped.reason is not None
    assert "beyond the wait_for_reset horizon" in stopped.reason
    assert "the policy cannot wait that long, so stop (quota_limited, hard)" in stopped.reason
    assert "used" not in stopped.reason, "nothing was used up: the circuit outlasts the wait"


@pytest.mark.parametrize(("open_s", "parks"), [(200, True), (210, True), (240, False)])
def test_a_retry_parks_only_while_the_circuit_wakes_within_its_remaining_retries(
    open_s: float, parks: bool
) -> None:
    shape = trio(claude=retries(3, 30, Outcome.SKIP))  # 30 + 60 + 120 = 210 s of retries
    after = failed(started(shape), board(shape, {"claude": opened(open_s)}))
    if parks:
        assert (after.state, after.reason, after.retry_ordinal) == ("retry_wait", REASON_PARKED, 1)
    else:
        assert (after.state, after.candidate_id) == ("switching", "codex")


def test_the_retry_horizon_shrinks_as_the_budget_is_used() -> None:
    shape = trio(claude=retries(3, 30, Outcome.STOP))
    route = failed(started(shape), board(shape, {}))  # retry 1 (30 s) used
    assert route.deadline is not None
    at = route.deadline
    dispatched = run(route, FireDue(1, 1), RouteContext(at, circuits=board(shape, {})))
    command = ReportFailure(1, overloaded(), safe_turn(), "kanban", f"inv-{ROUTE}")
    left = board(shape, {"claude": opened(170, at)})  # 60 + 120 = 180 s of retries left
    assert run(dispatched, command, RouteContext(at, circuits=left)).reason == REASON_PARKED
    beyond = board(shape, {"claude": opened(200, at)})  # would have parked at retry 1
    stopped = run(dispatched, command, RouteContext(at, circuits=beyond))
    assert stopped.state == "action_required"


def test_start_and_start_fresh_prefer_a_candidate_whose_circuit_is_closed() -> None:
    shape = trio()
    assert started(shape, board(shape, {"claude": opened(600)})).candidate_id == "codex"
    every = {c.id: opened(600) for c in shape.candidates}
    assert started(shape, board(shape, every)).candidate_id == "claude"
    route = started(shape)
    stopped = run(route, StopRoute(1), RouteContext(T0))
    context = RouteContext(T0, circuits=board(shape, {"claude": opened(600), "codex": opened(600)}))
    fresh = run(stopped, StartFresh(1), context)
    assert (fresh.state, fresh.candidate_id, fresh.generation) == ("active", "gemini", 2)


def test_without_a_board_a_skip_takes_the_next_candidate_as_before() -> None:
    shape = trio()
    after = failed(started(shape), None)
    assert after.candidate_id == "codex"


def test_a_candidate_without_a_provider_is_never_blocked() -> None:
    shape = profile(
        candidate("claude"),
        candidate("local", transient=immediately(Outcome.STOP)).model_copy(
            update={"provider": None}
        ),
    )
    claude = key_of(shape, "claude", BINDING)
    assert claude is not None
    views = [CircuitView(resource=k) for _, k in covering(claude)]
    after = failed(started(shape), CircuitBoard(BINDING, views))
    assert after.candidate_id == "local"


def test_a_start_with_every_candidate_open_parks_on_the_first_while_its_policy_would_wait() -> None:
    shape = trio(claude=reset_wait(300, Outcome.SKIP))
    first = candidates_of(shape)[0]
    horizon = max(hold_seconds(first, error_class) for error_class in POLICY_CLASSES)
    assert horizon > 0
    within = {c.id: opened(horizon - 5) for c in shape.candidates}
    parked = started(shape, board(shape, within))
    assert (parked.state, parked.reason, parked.candidate_id) == (
        "retry_wait", REASON_PARKED, "claude",
    )  # fmt: skip
    assert parked.deadline is not None  # the circuit's wake: its reset and a jitter
    assert T0 + timedelta(seconds=horizon - 5) <= parked.deadline <= T0 + timedelta(seconds=horizon)
    assert parked.pending_outcome == "retry"
    beyond = {c.id: opened(horizon + 60) for c in shape.candidates}
    assert started(shape, board(shape, beyond)).state == "active"


def test_a_due_retry_whose_circuit_stays_open_past_the_retries_left_takes_on_exhausted() -> None:
    # Its own failures (and others') opened the circuit while it waited for its last
    # retry: waiting out the whole backoff is beyond what its policy would wait.
    shape = trio(claude=retries(1, 30, Outcome.SKIP))
    route = failed(started(shape), board(shape, {}))
    assert (route.state, route.retry_ordinal) == ("retry_wait", 1)
    assert route.deadline is not None
    at = route.deadline
    fired = run(route, FireDue(1, route.attempt_ordinal), RouteContext(at, circuits=board(shape, {
        "claude": opened(600, at)})))  # fmt: skip
    assert (fired.state, fired.candidate_id, fired.generation) == ("switching", "codex", 2)
    assert fired.reason is not None
    assert "beyond the 0 s of retries" in fired.reason


def test_a_due_retry_still_parks_within_its_retries_left_or_behind_a_running_probe() -> None:
    shape = trio(claude=retries(2, 30, Outcome.SKIP))  # 30 s, then 60 s
    route = failed(started(shape), board(shape, {}))
    assert route.deadline is not None
    at = route.deadline
    due = FireDue(1, route.attempt_ordinal)
    within = run(route, due, RouteContext(at, circuits=board(shape, {"claude": opened(45, at)})))
    assert (within.state, within.reason) == ("retry_wait", REASON_PARKED)
    expired = opened(600, at - timedelta(seconds=700))  # open until 100 s ago
    probing, grant = machine.acquire_probe(expired, "another-route", at, timedelta(seconds=900))
    assert isinstance(grant, ProbeGrant)
    behind = run(route, due, RouteContext(at, circuits=board(shape, {"claude": probing})))
    assert (behind.state, behind.reason, behind.generation) == ("retry_wait", REASON_PARKED, 1)
