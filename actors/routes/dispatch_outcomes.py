"""What a dispatch job's outcome does to its route, planned like any other command.

A dispatch job settles its attempt one of two ways, each fenced exactly on that attempt
(the route `retrying` it, at its generation and attempt ordinal), so a job for an attempt
the route has left changes nothing:

- `SettleDispatch`: the outcome is ambiguous (the dispatcher raised, or its worker died
  inside it), or the dispatcher cannot even be loaded (a configuration error a retry would
  only repeat): the route goes to `action_required` with the reason.
- `ReturnUnsent`: the dispatcher raised `NotDispatched`, so nothing was sent. That is
  back-pressure, not a provider failure: the same attempt (route, generation, attempt
  ordinal) waits in `retry_wait` and is delivered again after the dispatcher's
  `retry_after` hint, else after a doubling backoff (REDELIVERY_BASE_S, 2x each time,
  at most REDELIVERY_CAP_S), fired by its host's timer like any wait. The provider's
  retry budget, the cycle and the policy are untouched and the failure is not counted on
  any circuit. After MAX_REDELIVERIES answers for one attempt the route stops for manual
  recovery with the reason. The redelivery count lives on the route (`redeliveries`) and
  starts again with the next attempt. A redelivery onto a circuit that is not closed waits
  parked on it (the later of the two deadlines). A probe that was not sent gives no
  verdict: the job gives its lease up before the round reads the circuits, so the
  redelivery parks until it can probe again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from actors.routes.commands import ReturnUnsent, RouteContext, SettleDispatch
from actors.routes.models import RouteSnapshot, Transition, attempt_retrying
from actors.routes.parking import parked_changes
from actors.routes.steps import clip, step, updated
from catalogue import sanitize
from policy.decisions import utc_iso

MAX_REDELIVERIES: Final = 8
REDELIVERY_BASE_S: Final = 2.0
REDELIVERY_CAP_S: Final = 300.0
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


def redelivery_delay_s(answers: int, retry_after_s: float | None) -> float:
    """Seconds until the redelivery after the dispatcher's `answers`-th NotDispatched for
    one attempt: its hint when it gave one, else the doubling backoff."""
    if retry_after_s is not None:
        return retry_after_s
    return min(REDELIVERY_CAP_S, REDELIVERY_BASE_S * float(2 ** (answers - 1)))


def return_unsent_transition(
    snapshot: RouteSnapshot, command: ReturnUnsent, context: RouteContext
) -> Transition | None:
    if not attempt_retrying(snapshot, command.fence(snapshot.route_id)):
        return None
    answers = snapshot.redeliveries + 1
    detail = clip(sanitize(command.detail)) if command.detail else "no detail"
    if answers > MAX_REDELIVERIES:
        route = updated(
            snapshot, state="action_required", pending_outcome="stop",
            reason=clip(
                f"the dispatcher did not take attempt {snapshot.attempt_ordinal} after "
                f"{MAX_REDELIVERIES} redeliveries ({detail}), so stop"
            ),
        )  # fmt: skip
        return step(
            snapshot, context, cause=CAUSE_NOT_DISPATCHED, route=route, decision="stop",
            safe_excerpt=detail,
        )  # fmt: skip
    deadline = context.now + timedelta(seconds=redelivery_delay_s(answers, command.retry_after_s))
    changes = {
        "state": "retry_wait", "deadline": deadline, "pending_outcome": "retry",
        "redeliveries": answers,
        "reason": clip(
            f"the dispatcher sent nothing ({detail}): redelivery {answers} of "
            f"{MAX_REDELIVERIES} at {utc_iso(deadline)}"
        ),
    }  # fmt: skip
    # An unsent probe gave its lease up: the redelivery waits on the circuit, whose owner
    # wakes one parked route when the probe is due.
    unsent = snapshot.model_copy(update={"probe_token": None})
    route = updated(snapshot, **{**changes, **parked_changes(unsent, context, deadline)})
    return step(
        snapshot, context, cause=CAUSE_NOT_DISPATCHED, route=route, decision="not_dispatched",
        safe_excerpt=detail,
    )  # fmt: skip
