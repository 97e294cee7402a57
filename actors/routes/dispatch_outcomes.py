"""What a dispatch job's outcome does to its route, planned like any other command.

A dispatch job settles its attempt one of two ways, each fenced exactly on that attempt
(the route `retrying` it, at its generation and attempt ordinal), so a job for an attempt
the route has left changes nothing:

- `SettleDispatch`: the outcome is ambiguous (the dispatcher raised, or its worker died
  inside it), or the dispatcher cannot even be loaded (a configuration error a retry would
  only repeat): the route goes to `action_required` with the reason.
- `ReturnUnsent`: the dispatcher raised `NotDispatched`, so nothing was sent, and the
  attempt goes back to the policy (docs/CONTRACTS.md, Routes) as a failure reported before
  any partial result: a turn with no output, no thoughts, no tool call, delivery known not
  to have happened, so effect-safe. It is planned as the failure report it stands for
  (`failure_transition`): the policy retries again (the next attempt ordinal: the budget
  runs out and `on_exhausted` applies, so it cannot loop), waits for a reset, skips (the
  batch runner then completes the switch) or stops.

  The failure re-evaluated is the one the route is recovering from: the code, class, rule
  and catalogue version its snapshot stores, not a classification of the NotDispatched,
  which is no provider failure (as evidence it would be `unclassified` and stop every
  route); the retry budget, reset-wait use and `on_exhausted` are that failure's. Its
  detail is the history record's safe excerpt (sanitised); the cause is `not_dispatched`.
  The stored failure has no confidence, scope or timing hint: confidence is `high` (the
  policy acted on it), the scope is the code's, and there is no hint (a trusted reset is
  waited once per class and cycle, and was already). It is not counted on its circuit
  again, and a probe that was not sent gives no verdict (the job gives its lease up before
  the round reads the circuits, so a route that waits parks until it can probe again).
"""

from __future__ import annotations

from typing import Final

from actors.routes.commands import ReportFailure, ReturnUnsent, RouteContext, SettleDispatch
from actors.routes.judgement import failure_transition
from actors.routes.models import RouteSnapshot, Transition, attempt_retrying
from actors.routes.steps import step, updated
from catalogue import Classification, Confidence, code_info, sanitize
from catalogue.boundary import known_rule_codes
from catalogue.codes import UnknownCodeError
from policy import TurnEvidence

REASON_NOT_DISPATCHED: Final = "dispatcher reported not dispatched"
REASON_NOTHING_TO_REEVALUATE: Final = (
    "dispatcher reported not dispatched; the route stores no failure to re-evaluate"
)
CAUSE_NOT_DISPATCHED: Final = "not_dispatched"


def settle_dispatch_transition(
    snapshot: RouteSnapshot, command: SettleDispatch, context: RouteContext
) -> Transition | None:
    if not attempt_retrying(snapshot, command.fence(snapshot.route_id)):
        return None
    route = updated(
        snapshot, state="action_required", pending_outcome="stop", reason=command.reason
    )
    return step(snapshot, context, cause="dispatch", route=route, decision="stop")


def return_unsent_transition(
    snapshot: RouteSnapshot, command: ReturnUnsent, context: RouteContext
) -> Transition | None:
    if not attempt_retrying(snapshot, command.fence(snapshot.route_id)):
        return None
    report = not_dispatched_report(snapshot, command.detail, context)
    if report is None:
        return settle_dispatch_transition(
            snapshot,
            SettleDispatch(command.generation, command.ordinal, REASON_NOTHING_TO_REEVALUATE),
            context,
        )
    # The probe, if this attempt was one, ended unsent: it gives no verdict.
    unsent = snapshot.model_copy(update={"probe_token": None})
    planned = failure_transition(unsent, report, context, count_failure=False)
    return planned.model_copy(update={"cause": CAUSE_NOT_DISPATCHED})


def not_dispatched_report(
    snapshot: RouteSnapshot, detail: str, context: RouteContext
) -> ReportFailure | None:
    """The route's stored failure reported again, as of a turn that never started; None
    when the route stores no complete failure (or one the registry or the catalogue no
    longer knows: the report is re-validated like a caller's, catalogue/boundary.py)."""
    code, error_class = snapshot.code, snapshot.error_class
    rule, version = snapshot.rule, snapshot.catalogue_version
    if code is None or error_class is None or rule is None or version is None:
        return None
    if rule not in known_rule_codes():  # a rule a later catalogue no longer ships
        return None
    if snapshot.caller is None or snapshot.invocation_id is None:
        return None
    try:
        scope = code_info(code).scope
    except UnknownCodeError:
        return None
    failure = Classification(
        code=code, error_class=error_class, confidence=Confidence.HIGH, scope=scope, rule=rule,
        catalogue_version=version, occurred_at=context.now,
        safe_excerpt=sanitize(f"{REASON_NOT_DISPATCHED}: {detail}"),
    )  # fmt: skip
    return ReportFailure(
        snapshot.generation, failure, unsent_turn(snapshot), snapshot.caller,
        snapshot.invocation_id,
    )  # fmt: skip


def unsent_turn(snapshot: RouteSnapshot) -> TurnEvidence:
    """What was observed of an attempt the dispatcher never sent: nothing at all."""
    return TurnEvidence(
        execution_id=f"{snapshot.route_id}:{snapshot.generation}:{snapshot.attempt_ordinal}",
        prompt_generation=snapshot.attempt_ordinal, output_observed=False,
        thoughts_observed=False, tool_call_started=False, tool_call_completed=False,
        partial_utility_result=False, ambiguous_delivery=False,
    )  # fmt: skip
