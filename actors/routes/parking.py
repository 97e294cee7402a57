"""The route steps circuits add (actors/routes/circuit_board.py says when): park, probe,
release. Pure, like every planner step: the circuits are the context's CircuitBoard.

Parking never consumes retry budget: a re-park keeps the attempt ordinal, the retry
ordinal and the attempt's redelivery count, and only moves the deadline (with a `park`
history record); a release moves the deadline of a parked route to its wave slot and
writes no history record.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from actors.errors import CorruptProfileError
from actors.routes.circuit_board import REASON_PARKED, REASON_PROBE, REASON_RELEASED, Park, Probe
from actors.routes.commands import (
    FireDue,
    ProbeParked,
    ReleaseParked,
    RetryNow,
    RouteCommand,
    RouteContext,
)
from actors.routes.deadline import deadline_passed
from actors.routes.eligibility import on_exhausted, retries_left_s
from actors.routes.models import (
    WAITING_STATES,
    AttemptDecision,
    RouteSnapshot,
    Transition,
    attempt_due,
)
from actors.routes.profile_errors import ProfileConfigurationError
from actors.routes.profiles import RouteCandidate, RouteProfile, find_candidate
from actors.routes.steps import WAITING, clip, deadline_stop, skip_step, step, updated
from actors.routes.stored_profiles import configuration_stop, decision_profile, require_followable
from circuits import CircuitStatus
from policy import Outcome
from policy.decisions import utc_iso


def parked_changes(
    snapshot: RouteSnapshot, context: RouteContext, deadline: datetime
) -> dict[str, Any]:
    """The changes that park a failure decision waiting until `deadline` on the route's
    candidate when its circuit is not closed; {} when it is (or no circuits are known)."""
    board = context.circuits
    if board is None:
        return {}
    park = board.blocking(board.key_of(snapshot), context.now)
    if park is None:
        return {}
    return {
        "deadline": max(deadline, park.deadline), "reason": REASON_PARKED, "circuit": park.circuit,
    }  # fmt: skip


def outlasted_retry(snapshot: RouteSnapshot, context: RouteContext) -> Transition | None:
    """A due retry whose candidate's circuit is open (cooling down, no probe running) past
    every retry its policy still allows: the policy's on_exhausted now, as the decision
    would have been had the circuit been open when it was made (capped_by_circuit in
    actors/routes/judgement.py), instead of parking the route until the circuit's wake
    (a retry of a route whose own failures opened its model's circuit waited out the whole
    backoff). None when the attempt may go on (to the gate)."""
    found = _outlasting(snapshot, context)
    if found is None:
        return None
    park, (profile, recorded), candidate, left = found
    assert snapshot.error_class is not None  # checked by _outlasting
    why = (
        f"circuit {park.circuit} is open until {utc_iso(park.until)}, beyond the {left:g} s "
        "of retries the policy still allows"
    )
    if on_exhausted(candidate, snapshot.error_class) is Outcome.SKIP:
        return skip_step(
            snapshot, context, profile=profile, usage=snapshot.cycle.to_usage(),
            reason=clip(f"{why}, so skip to the next candidate"), cause="circuit_open",
            decision="skip", changes=recorded,
        )  # fmt: skip
    route = updated(
        snapshot,
        state="action_required",
        pending_outcome="stop",
        reason=clip(f"{why}, so stop"),
        **recorded,
    )
    return step(snapshot, context, cause="circuit_open", route=route, decision="stop")


def _outlasting(
    snapshot: RouteSnapshot, context: RouteContext
) -> tuple[Park, tuple[RouteProfile, dict[str, Any]], RouteCandidate, float] | None:
    """The open circuit a due retry would park on past its policy's retries, with what
    deciding needs; None when it may go on."""
    board, error_class = context.circuits, snapshot.error_class
    if board is None or error_class is None or snapshot.pending_outcome != "retry":
        return None
    if snapshot.retry_ordinal == 0 or snapshot.route_id in board.grants:
        return None  # a skip's first attempt keeps its own horizon; a probe goes
    park = board.blocking(board.key_of(snapshot), context.now)
    state = None if park is None else board.states.get(park.circuit)
    if park is None or state is None or state.status is not CircuitStatus.OPEN:
        return None
    try:  # the decision it makes uses a followed profile's current version
        decided = decision_profile(snapshot, context.profiles)
    except (CorruptProfileError, ProfileConfigurationError):
        return None  # gated_step stops a route whose followed profile is gone
    candidate = find_candidate(decided[0], snapshot.candidate_id)
    left = (
        0.0 if candidate is None else retries_left_s(candidate, error_class, snapshot.retry_ordinal)
    )
    if candidate is None or park.until <= context.now + timedelta(seconds=left):
        return None
    return park, decided, candidate, left


def gated_step(
    snapshot: RouteSnapshot,
    context: RouteContext,
    *,
    cause: str,
    decision: AttemptDecision,
    reason: str,
) -> Transition:
    """A due attempt (a timer, retry now): `retrying` when its circuits let it dispatch
    (as the probe when the round holds the lease for it), else parked again. A route whose
    followed stored profile cannot be decided from stops instead: it never dispatches."""
    try:
        require_followable(snapshot, context)
    except ProfileConfigurationError as error:
        return configuration_stop(snapshot, context, error)
    board = context.circuits
    gate = None if board is None else board.gate(snapshot, context.now)
    match gate:
        case Park():
            return repark(snapshot, context, gate)
        case Probe(circuit=circuit, token=token):
            route = updated(
                snapshot, state="retrying", reason=clip(f"{REASON_PROBE}: {reason}"),
                circuit=circuit, probe_token=token, redeliveries=snapshot.redeliveries,
            )  # fmt: skip
        case _:
            route = updated(
                snapshot, state="retrying", reason=reason, redeliveries=snapshot.redeliveries
            )
    return step(snapshot, context, cause=cause, route=route, decision=decision)


def repark(snapshot: RouteSnapshot, context: RouteContext, park: Park) -> Transition:
    """The same attempt waits again on the circuit: same state, ordinals and budget."""
    route = updated(
        snapshot, state=snapshot.state, deadline=park.deadline,
        pending_outcome=snapshot.pending_outcome, circuit=park.circuit,
        reason=REASON_RELEASED if park.released else REASON_PARKED,
        redeliveries=snapshot.redeliveries,
    )  # fmt: skip
    return step(snapshot, context, cause="circuit_park", route=route, decision="park")


def release_transition(
    snapshot: RouteSnapshot, command: ReleaseParked, context: RouteContext
) -> Transition | None:
    """A closed circuit's wave slot for a route still parked on it. The route keeps the
    host it has: the release joins no host's index."""
    if (
        snapshot.state not in WAITING
        or snapshot.circuit != command.circuit
        or (snapshot.reason == REASON_RELEASED and snapshot.deadline == command.at)
    ):
        return None
    route = updated(
        snapshot, state=snapshot.state, deadline=command.at,
        pending_outcome=snapshot.pending_outcome, circuit=command.circuit,
        reason=REASON_RELEASED, redeliveries=snapshot.redeliveries,
    )  # fmt: skip
    planned = step(snapshot, context, cause="circuit_release", route=route, decision=None)
    return planned.model_copy(update={"host_id": None})


def probe_wake_transition(
    snapshot: RouteSnapshot, command: ProbeParked, context: RouteContext
) -> Transition | None:
    """The circuit's owner woke this parked route at the circuit's probe time: its
    pending attempt is due now (the probe when the round holds the lease for it, else
    parked again); nothing when it no longer waits parked on that circuit."""
    if not _parked_on(snapshot, command.circuit):
        return None
    if deadline_passed(snapshot, context.now):
        return deadline_stop(snapshot, context)
    return gated_step(
        snapshot, context, cause="circuit_probe_wake", decision="deadline_reached",
        reason=f"the probe of circuit {command.circuit} is due",
    )  # fmt: skip


def _parked_on(snapshot: RouteSnapshot, circuit: str) -> bool:
    return (
        snapshot.state in WAITING
        and snapshot.circuit == circuit
        and snapshot.reason == REASON_PARKED
        and snapshot.probe_token is None
    )


def would_dispatch_now(command: RouteCommand, snapshot: RouteSnapshot, now: datetime) -> bool:
    """A command that would dispatch the route's pending attempt now if nothing stopped
    it: its timer (the attempt still pending, its deadline come), a retry-now, or its
    circuit owner's probe wake."""
    if snapshot.state not in WAITING_STATES:
        return False
    if isinstance(command, RetryNow):
        return command.expected_generation == snapshot.generation
    if isinstance(command, FireDue):
        return attempt_due(snapshot, command.fence(snapshot.route_id), now)
    if isinstance(command, ProbeParked):
        return _parked_on(snapshot, command.circuit)
    return False
