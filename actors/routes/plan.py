"""A route's logic as one pure function: `plan(snapshot, command, context)`.

It returns the one Transition that carries the command out, fenced on the snapshot it was
planned from, or None when the command has nothing to do (a late or duplicate timer, an
idempotent cancel, stop or close, a success on a clean route). A command the route cannot
take raises the typed rejection: StaleGenerationError for a stale expected generation,
InvalidStateError for a state that does not allow it, NoEligibleCandidateError when no
candidate is left to run on. It reads no clock and does no I/O.

    none              --start-->            active (generation 1)
    active|retrying|switching --failure-->  retry_wait | waiting_for_reset | switching
                                            (generation + 1) | action_required
    active|retrying|switching --success-->  active (the cycle ends)
    retry_wait|waiting_for_reset --due, retry now--> retrying
    retry_wait|waiting_for_reset --skip now-->       switching (generation + 1)
                                                     | action_required (none left)
    retry_wait|waiting_for_reset --cancel wait-->    action_required
    any live state    --stop-->             action_required
    switching         --switch complete-->  active
    action_required   --resume-->           active (same candidate and generation)
    action_required   --start fresh-->      active (generation + 1, first eligible, new cycle)
    any live state    --close-->            closed (terminal; expires)
"""

from __future__ import annotations

from typing import Any

from actors.errors import (
    InvalidCommandError,
    InvalidStateError,
    NoEligibleCandidateError,
    StaleGenerationError,
)
from actors.keys import valid_caller, valid_request_id, valid_task_id
from actors.routes.circuit_board import REASON_PARKED
from actors.routes.commands import (
    CancelWait,
    Close,
    CompleteSwitch,
    FireDue,
    ProbeParked,
    Quarantine,
    ReleaseParked,
    ReportFailure,
    ReportSuccess,
    Resume,
    RetryNow,
    ReturnUnsent,
    RouteCommand,
    RouteContext,
    SettleDispatch,
    SkipNow,
    Start,
    StartFresh,
    StopRoute,
    UpdateProfile,
    request_id_of,
)
from actors.routes.deadline import deadline_passed, valid_recovery_deadline
from actors.routes.dispatch_outcomes import return_unsent_transition, settle_dispatch_transition
from actors.routes.eligibility import choose_start, start_park, start_probe_changes
from actors.routes.judgement import failure_transition
from actors.routes.models import (
    UTILITY_CALLER,
    CycleRecord,
    RouteSnapshot,
    RouteUpdate,
    Transition,
    attempt_due,
)
from actors.routes.parking import (
    gated_step,
    outlasted_retry,
    probe_wake_transition,
    release_transition,
)
from actors.routes.profile_errors import ProfileConfigurationError
from actors.routes.profiles import profile_json
from actors.routes.quarantine import quarantine_transition
from actors.routes.steps import (
    FAILURE_CLEARED,
    LIVE,
    REPORTABLE,
    WAITING,
    deadline_stop,
    require,
    skip_step,
    step,
    updated,
)
from actors.routes.stored_profiles import (
    configuration_stop,
    decision_profile,
    given_profile,
    require_followable,
)


def plan(  # noqa: PLR0911, PLR0912 - one case per command: this match is the dispatch table
    snapshot: RouteSnapshot, command: RouteCommand, context: RouteContext
) -> Transition | None:
    """The transition that carries out `command` on the route `snapshot` shows. Raises
    InvalidIdentifierError for a request id outside `[A-Za-z0-9._:-]{1,128}`."""
    request_id = request_id_of(command)
    if request_id is not None:
        valid_request_id(request_id)
    match command:
        case Start():
            return start_transition(snapshot, command, context)
        case ReportFailure():
            return failure_transition(snapshot, command, context)
        case ReportSuccess():
            return success_transition(snapshot, command, context)
        case FireDue():
            return due_transition(snapshot, command, context)
        case ReleaseParked():
            return release_transition(snapshot, command, context)
        case ProbeParked():
            return probe_wake_transition(snapshot, command, context)
        case RetryNow():
            return retry_now_transition(snapshot, command, context)
        case SkipNow():
            return skip_now_transition(snapshot, command, context)
        case CancelWait():
            return cancel_wait_transition(snapshot, command, context)
        case StopRoute():
            return stop_transition(snapshot, command, context)
        case Resume():
            return resume_transition(snapshot, command, context)
        case StartFresh():
            return start_fresh_transition(snapshot, command, context)
        case Close():
            return close_transition(snapshot, command, context)
        case CompleteSwitch():
            return switch_complete_transition(snapshot, command, context)
        case UpdateProfile():
            return profile_transition(snapshot, command, context)
        case SettleDispatch():
            return settle_dispatch_transition(snapshot, command, context)
        case ReturnUnsent():
            return return_unsent_transition(snapshot, command, context)
        case Quarantine():
            return quarantine_transition(snapshot, command, context)


def start_transition(snapshot: RouteSnapshot, command: Start, context: RouteContext) -> Transition:
    if snapshot.state != "none":
        raise StaleGenerationError(snapshot.route_id, 0, snapshot.generation, snapshot.state)
    caller = valid_caller(command.caller)
    recovery_deadline = valid_recovery_deadline(command.recovery_deadline, context.now)
    given = given_profile(command.profile, command.profile_id, context.profiles)
    if given is None:
        raise InvalidCommandError("profile", None, "a profile, or a stored profile's id")
    profile, recorded = given
    first = choose_start(context.circuits, profile, context.now, snapshot.route_id)
    if first is None:
        raise NoEligibleCandidateError(snapshot.route_id, "start")
    fields: dict[str, Any] = {"state": "active", **recorded}
    fields |= start_probe_changes(context.circuits, profile, first, snapshot.route_id, context.now)
    park = start_park(context.circuits, profile, first, snapshot.route_id, context.now)
    if park is not None:  # every candidate is blocked: its first attempt waits on it
        fields |= {
            "state": "retry_wait", "pending_outcome": "retry", "deadline": park.deadline,
            "reason": REASON_PARKED, "circuit": park.circuit,
        }  # fmt: skip
    route = RouteUpdate(
        candidate_id=first.id,
        candidate_index=first.index,
        caller=caller,
        utility=command.utility is True or caller == UTILITY_CALLER,
        recovery_deadline=recovery_deadline,
        invocation_id=command.invocation_id,
        provider_session_id=command.provider_session_id,
        task_id=None if command.task_id is None else valid_task_id(command.task_id),
        **fields,
    )
    return step(snapshot, context, cause="start", route=route, decision="start")


def success_transition(
    snapshot: RouteSnapshot, command: ReportSuccess, context: RouteContext
) -> Transition | None:
    """A success ends the cycle: its retry, reset-wait and skip usage is forgotten. A
    success on an active route with nothing to forget writes nothing."""
    require(snapshot, command.expected_generation, REPORTABLE)
    clean = (
        snapshot.state == "active"
        and snapshot.code is None
        and snapshot.cycle == CycleRecord()
        and snapshot.probe_token is None  # a probing start's success closes its circuit
    )
    if clean:
        return None
    if context.circuits is not None:
        context.circuits.note_success(snapshot, context.now)
    route = updated(snapshot, **FAILURE_CLEARED, state="active", reason=None, cycle=CycleRecord())
    return step(snapshot, context, cause="report_success", route=route, decision="success")


def due_transition(
    snapshot: RouteSnapshot, command: FireDue, context: RouteContext
) -> Transition | None:
    """The pending attempt's deadline has come: retrying. Nothing happens unless the
    route still waits for exactly that attempt (generation and ordinal) and the deadline
    is not in the future (an early timer re-arms). A circuit that is not closed parks
    the attempt again instead, unless this attempt holds its probe lease
    (actors/routes/parking.py)."""
    if not attempt_due(snapshot, command.fence(snapshot.route_id), context.now):
        return None
    if deadline_passed(snapshot, context.now):
        return deadline_stop(snapshot, context)
    if snapshot.state == "waiting_for_reset":
        reason = "the trusted reset is reached: one attempt of the same candidate"
    elif snapshot.retry_ordinal == 0:  # a skip parked on its candidate's open circuit
        reason = f"the first attempt on {snapshot.candidate_id} is due"
    else:
        reason = f"retry {snapshot.retry_ordinal} of {snapshot.retry_max} is due"
    outlasted = outlasted_retry(snapshot, context)
    if outlasted is not None:
        return outlasted
    return gated_step(
        snapshot, context, cause="deadline_reached", decision="deadline_reached", reason=reason
    )


def retry_now_transition(
    snapshot: RouteSnapshot, command: RetryNow, context: RouteContext
) -> Transition:
    """The pending attempt starts now instead of at its deadline (its timers then find
    nothing pending). Not into a circuit that is not closed: there it is the probe if
    the probe is due, else it stays parked (a new deadline, no budget)."""
    require(snapshot, command.expected_generation, WAITING)
    return gated_step(
        snapshot, context, cause="retry_now", decision="retry_now",
        reason="retried now by the user",
    )  # fmt: skip


def skip_now_transition(
    snapshot: RouteSnapshot, command: SkipNow, context: RouteContext
) -> Transition:
    require(snapshot, command.expected_generation, WAITING)
    try:
        profile, recorded = decision_profile(snapshot, context.profiles)
    except ProfileConfigurationError as error:
        return configuration_stop(snapshot, context, error)
    return skip_step(
        snapshot, context, profile=profile, usage=snapshot.cycle.to_usage(),
        reason="skipped by the user; skip to the next candidate", cause="skip_now",
        decision="skip_now", changes=recorded,
    )  # fmt: skip


def cancel_wait_transition(
    snapshot: RouteSnapshot, command: CancelWait, context: RouteContext
) -> Transition | None:
    """Idempotent: with no wait pending (any more) it does nothing."""
    require(snapshot, command.expected_generation, LIVE | {"closed"})
    if snapshot.state not in WAITING:
        return None
    route = updated(
        snapshot, state="action_required", pending_outcome="stop",
        reason="the wait was cancelled by the user",
    )  # fmt: skip
    return step(snapshot, context, cause="cancel_wait", route=route, decision="cancel_wait")


def stop_transition(
    snapshot: RouteSnapshot, command: StopRoute, context: RouteContext
) -> Transition | None:
    """Stop automatic recovery; a route already stopped stays as it is."""
    require(snapshot, command.expected_generation, LIVE)
    if snapshot.state == "action_required":
        return None
    route = updated(
        snapshot, state="action_required", pending_outcome="stop", reason="stopped by the user"
    )
    return step(snapshot, context, cause="stop", route=route, decision="stop")


def resume_transition(
    snapshot: RouteSnapshot, command: Resume, context: RouteContext
) -> Transition:
    """The same candidate, in the same generation and cycle (a provider-native resume is
    the dispatcher's business). Refused while the stored profile the route follows
    cannot be decided from (ProfileConfigurationError): it never authorises work."""
    require(snapshot, command.expected_generation, {"action_required"})
    if snapshot.candidate_id is None:
        raise NoEligibleCandidateError(snapshot.route_id, "resume")
    require_followable(snapshot, context)
    route = updated(snapshot, state="active", reason="resumed by the user")
    return step(snapshot, context, cause="resume", route=route, decision="resume")


def start_fresh_transition(
    snapshot: RouteSnapshot, command: StartFresh, context: RouteContext
) -> Transition:
    require(snapshot, command.expected_generation, {"action_required"})
    recovery_deadline = snapshot.recovery_deadline
    if command.recovery_deadline is not None:
        recovery_deadline = valid_recovery_deadline(command.recovery_deadline, context.now)
    given = given_profile(command.profile, command.profile_id, context.profiles)
    profile, recorded = given if given is not None else decision_profile(snapshot, context.profiles)
    first = choose_start(context.circuits, profile, context.now, snapshot.route_id)
    if first is None:
        raise NoEligibleCandidateError(snapshot.route_id, "start fresh")
    probe = start_probe_changes(context.circuits, profile, first, snapshot.route_id, context.now)
    route = updated(
        snapshot, **FAILURE_CLEARED, state="active", candidate_id=first.id,
        candidate_index=first.index, attempt_ordinal=0, cycle=CycleRecord(),
        reason="started fresh by the user", provider_session_id=None,
        recovery_deadline=recovery_deadline, **probe, **recorded,
    )  # fmt: skip
    return step(
        snapshot, context, cause="start_fresh", route=route, decision="start_fresh", bump=True
    )


def close_transition(
    snapshot: RouteSnapshot, command: Close, context: RouteContext
) -> Transition | None:
    """Terminal: a closed route takes no further command and expires. Closing it again
    does nothing."""
    require(snapshot, command.expected_generation, LIVE | {"closed"})
    if snapshot.state == "closed":
        return None
    route = updated(snapshot, state="closed", reason="closed by the user")
    return step(snapshot, context, cause="close", route=route, decision="close")


def switch_complete_transition(
    snapshot: RouteSnapshot, command: CompleteSwitch, context: RouteContext
) -> Transition | None:
    if snapshot.state != "switching" or snapshot.generation != command.generation:
        return None
    route = updated(snapshot, state="active")
    return step(snapshot, context, cause="switch_complete", route=route, decision=None)


def profile_transition(
    snapshot: RouteSnapshot, command: UpdateProfile, context: RouteContext
) -> Transition:
    """Store an edited profile for the next decision. Everything else stays, including a
    pending schedule and the policy snapshot it was decided with. A route that follows a
    stored profile is edited there (the profile store), not here: InvalidCommandError."""
    if snapshot.state not in LIVE:
        raise InvalidStateError(snapshot.route_id, snapshot.state, LIVE, snapshot.generation)
    if snapshot.profile_id is not None:
        raise InvalidCommandError(
            "profile", snapshot.profile_id, "edited in the profile store: the route follows it"
        )
    route = updated(
        snapshot, deadline=snapshot.deadline, pending_outcome=snapshot.pending_outcome,
        circuit=snapshot.circuit, probe_token=snapshot.probe_token,
        profile=profile_json(command.profile),
    )  # fmt: skip
    return step(snapshot, context, cause="profile_update", route=route, decision=None)
