"""A failure report becomes one decision, and the decision one transition.

Order (docs/DESIGN.md §2, §4; the seed's Per-class policy): classify the evidence with the
context's time (catalogue.classify) -> assess the turn's effect safety (policy.gate) ->
evaluate the current candidate's policy document with this cycle's usage
(policy.evaluate_in_cycle). The decision, the classification it was based on and the
policy snapshot of that moment are written by the one transition returned here:

- Retry -> retry_wait until the deadline (the next attempt ordinal);
- WaitForReset -> waiting_for_reset until the trusted reset (the next attempt ordinal);
  either parked (reason `circuit_open`, the later deadline) when the candidate's circuit
  is not closed once this failure is counted (actors/routes/parking.py);
- Skip -> switching to the next eligible candidate in a new generation, or
  action_required when none is left in this cycle;
- Stop -> action_required.

The caller (any name) is recorded, never consulted: every caller gets the same decision
for the same failure, profile and cycle. Only the utility flag (on the start or a report;
the caller name "utility" implies it) changes anything: another invocation's report on a
utility route is stale, and the route is ephemeral.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from actors.errors import CorruptProfileError, InvalidCommandError, StaleOrdinalError
from actors.keys import valid_caller
from actors.routes.commands import ReportFailure, RouteContext
from actors.routes.eligibility import decision_horizon
from actors.routes.models import UTILITY_CALLER, CycleRecord, RouteSnapshot, Transition
from actors.routes.parking import parked_changes
from actors.routes.profile_errors import ProfileConfigurationError
from actors.routes.profiles import RouteCandidate, RouteProfile, find_candidate
from actors.routes.steps import REPORTABLE, clip, require, skip_step, step, updated
from actors.routes.stored_profiles import configuration_reason, decision_profile
from catalogue import Classification, Evidence, classify
from catalogue.boundary import revalidated
from policy import (
    CycleUsage,
    Decision,
    EffectSafety,
    Failure,
    PolicyError,
    Retry,
    Skip,
    Stop,
    WaitForReset,
    assess_turn,
    evaluate,
    evaluate_in_cycle,
    launch_safety,
    stop_for_invalid_policy,
    utc_iso,
)


@dataclass(frozen=True, slots=True)
class Judgement:
    """Everything a failure decision was based on, and the cycle usage after it.
    `recorded`: the route fields recording the stored profile version it used."""

    classification: Classification
    safety: EffectSafety
    decision: Decision
    usage: CycleUsage
    profile: RouteProfile | None
    candidate: RouteCandidate | None
    recorded: dict[str, Any] = field(default_factory=dict)


def classification_of(report: ReportFailure, context: RouteContext) -> Classification:
    """The report's classification: its evidence classified at the context's time, or the
    Classification it carries checked again as the catalogue would have produced it
    (catalogue/boundary.py: a known rule, a bounded hint, a sanitised excerpt), else
    InvalidClassificationError, the report's own error, with no effect."""
    if isinstance(report.evidence, Classification):
        return revalidated(report.evidence, context.now)
    return (context.classifier or classify)(report.evidence, context.now)


def effect_safety(report: ReportFailure, context: RouteContext) -> EffectSafety:
    """The gate's verdict on the reported turn. The current execution and prompt
    generation are the ones the evidence names; evidence that names none (or a
    Classification) defers to the turn's own, which must still be recorded."""
    turn = report.turn
    evidence = None if isinstance(report.evidence, Classification) else report.evidence
    execution_id = (evidence.execution_id if evidence else None) or (
        turn.execution_id if turn else None
    )
    prompt_generation = evidence.prompt_generation if evidence else None
    if prompt_generation is None and turn is not None:
        prompt_generation = turn.prompt_generation
    return assess_turn(
        turn,
        execution_id=execution_id or "",
        prompt_generation=prompt_generation if prompt_generation is not None else 0,
        thoughts_block_replay=context.settings.thoughts_block_replay,
    )


def is_stale(snapshot: RouteSnapshot, report: ReportFailure) -> bool:
    """Evidence of another invocation than the report's, or a report on a utility route
    from another invocation than the one the route belongs to."""
    evidence = None if isinstance(report.evidence, Classification) else report.evidence
    if evidence is not None and evidence.invocation_id not in (None, report.invocation_id):
        return True
    return snapshot.utility and snapshot.invocation_id != report.invocation_id


def session_id_of(report: ReportFailure) -> str | None:
    """The agent's own session id the report names: its own, else its turn's."""
    if report.provider_session_id is not None:
        return report.provider_session_id
    return report.turn.provider_session_id if report.turn is not None else None


def judge_failure(
    snapshot: RouteSnapshot, report: ReportFailure, context: RouteContext
) -> Judgement:
    classification = classification_of(report, context)
    # A transport loss during launch is launch-safe; otherwise the turn's evidence decides.
    safety = launch_safety(classification.phase, classification.code) or effect_safety(
        report, context
    )
    usage = snapshot.cycle.to_usage()
    try:  # a followed stored profile's current version (actors/routes/stored_profiles.py)
        profile, recorded = decision_profile(snapshot, context.profiles)
    except (CorruptProfileError, ProfileConfigurationError) as error:
        stop = Stop(reason=configuration_reason(error))
        return Judgement(classification, safety, stop, usage, None, None)
    candidate = find_candidate(profile, snapshot.candidate_id)
    if candidate is None:
        stop = Stop(
            reason=f"candidate {snapshot.candidate_id!r} is no longer in the profile, so stop"
        )
        return Judgement(classification, safety, stop, usage, profile, None, recorded)
    failure = Failure.from_classification(classification, stale=is_stale(snapshot, report))
    try:
        decision, usage = evaluate_in_cycle(
            candidate.policy, candidate.id, failure, usage, now=context.now, safety=safety
        )
    except PolicyError as error:
        decision = stop_for_invalid_policy(error)
    return Judgement(classification, safety, decision, usage, profile, candidate, recorded)


def capped_by_circuit(
    snapshot: RouteSnapshot, report: ReportFailure, judged: Judgement, context: RouteContext
) -> Judgement:
    """A Retry or WaitForReset whose candidate's circuit stays blocked past the decision's
    own horizon (actors/routes/eligibility.py) becomes the policy's on_exhausted decision:
    the one it makes once this class's waits and retries are spent."""
    board, candidate, decision = context.circuits, judged.candidate, judged.decision
    if board is None or candidate is None or not isinstance(decision, Retry | WaitForReset):
        return judged
    park = board.blocking(board.key_of(snapshot), context.now)
    error_class = judged.classification.error_class
    horizon = decision_horizon(candidate, error_class, decision, context.now)
    if park is None or horizon is None or park.until <= horizon:
        return judged
    failure = Failure.from_classification(judged.classification, stale=is_stale(snapshot, report))
    spent = evaluate(
        candidate.policy, failure, now=context.now, safety=judged.safety,
        retry_ordinal=candidate.retry_budget(error_class), reset_wait_used=True,
    )  # fmt: skip
    # `spent` is what the policy does once it cannot wait any more; its own reason would
    # say the budget was used, which it was not: say what actually happened.
    why = (
        f"circuit {park.circuit} is open until {utc_iso(park.until)}, beyond the "
        f"{decision.kind} horizon {utc_iso(horizon)}: the policy cannot wait that long, "
        f"so {spent.kind} ({failure.code}, {error_class})"
    )
    exhausted = spent.model_copy(update={"reason": why})
    usage = snapshot.cycle.to_usage().after(candidate.id, error_class, exhausted)
    return replace(judged, decision=exhausted, usage=usage)


def failure_transition(
    snapshot: RouteSnapshot,
    report: ReportFailure,
    context: RouteContext,
) -> Transition:
    """The one transition that records the decision for a reported failure."""
    require(snapshot, report.expected_generation, REPORTABLE)
    if not isinstance(report.evidence, Evidence | Classification):
        raise InvalidCommandError("evidence", report.evidence, "an Evidence or a Classification")
    if report.attempt is not None and (type(report.attempt) is not int or report.attempt < 0):
        raise InvalidCommandError("attempt", report.attempt, "an integer >= 0 or None")
    if report.attempt is not None and report.attempt != snapshot.attempt_ordinal:
        raise StaleOrdinalError(
            snapshot.route_id, report.attempt, snapshot.attempt_ordinal, snapshot.generation,
            snapshot.state,
        )  # fmt: skip
    caller = valid_caller(report.caller)  # refused before any circuit counts the failure
    judged = judge_failure(snapshot, report, context)
    found = judged.classification
    if context.circuits is not None:  # counted (or the probe's verdict) before deciding
        context.circuits.note_failure(snapshot, found, context.now)
        judged = capped_by_circuit(snapshot, report, judged, context)
    candidate = judged.candidate
    utility = snapshot.utility or report.utility is True or caller == UTILITY_CALLER
    owner = {"caller": caller, "invocation_id": report.invocation_id, "utility": utility}
    failure: dict[str, Any] = {
        "code": found.code,
        "error_class": found.error_class,
        "rule": found.rule,
        "catalogue_version": found.catalogue_version,
        "policy_snapshot": candidate.policy_snapshot() if candidate else None,
        # A foreign report is refused, never adopted: the route keeps its own invocation.
        **({} if is_stale(snapshot, report) else owner),
        "provider_session_id": session_id_of(report) or snapshot.provider_session_id,
        "cycle": CycleRecord.from_usage(judged.usage),
        **judged.recorded,
    }
    used = judged.usage.retries_used(candidate.id, found.error_class) if candidate else 0
    budget = candidate.retry_budget(found.error_class) if candidate else 0
    excerpt = found.safe_excerpt or None

    def recorded(**changes: Any) -> Transition:
        route = updated(snapshot, **failure, **changes)
        kind = judged.decision.kind
        return step(
            snapshot, context, cause="report_failure", route=route, decision=kind,
            safe_excerpt=excerpt,
        )  # fmt: skip

    match judged.decision:
        case Retry(deadline=deadline, ordinal=ordinal, reason=reason):
            return recorded(**{
                "state": "retry_wait", "deadline": deadline, "pending_outcome": "retry",
                "retry_ordinal": ordinal, "retry_max": budget,
                "attempt_ordinal": snapshot.attempt_ordinal + 1, "reason": clip(reason),
                **parked_changes(snapshot, context, deadline),
            })  # fmt: skip
        case WaitForReset(deadline=deadline, reason=reason):
            return recorded(**{
                "state": "waiting_for_reset", "deadline": deadline,
                "pending_outcome": "retry_after_reset", "retry_ordinal": used,
                "retry_max": budget, "attempt_ordinal": snapshot.attempt_ordinal + 1,
                "reason": clip(reason), **parked_changes(snapshot, context, deadline),
            })  # fmt: skip
        case Skip(reason=reason) if judged.profile is not None:
            return skip_step(
                snapshot, context, profile=judged.profile, usage=judged.usage, reason=reason,
                cause="report_failure", decision="skip", safe_excerpt=excerpt,
                changes={**failure, "retry_ordinal": used, "retry_max": budget},
            )  # fmt: skip
        case Skip(reason=reason) | Stop(reason=reason):
            return recorded(
                state="action_required", pending_outcome="stop", retry_ordinal=used,
                retry_max=budget, reason=clip(reason),
            )  # fmt: skip
