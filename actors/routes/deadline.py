"""The recovery deadline: a bound on a route's whole recovery (docs/CONTRACTS.md, Routes).

A route started with `recovery_deadline` never waits past it: a wait (a retry, a reset
wait, a circuit park, a release slot, a dispatcher redelivery) planned to end later is cut
to end at the deadline with the pending outcome `stop`, and when the deadline comes the
route stops for manual recovery (`action_required`, `next_step` manual) with the reason
below. A wait planned once the deadline has passed stops at once. A running turn
(`active`, `retrying`) is never interrupted: its next failure stops it. Pure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from actors.errors import InvalidCommandError
from actors.routes.models import WAITING_STATES, PendingOutcome, RouteFields, RouteUpdate
from policy.decisions import utc_iso

# A waiting route's pending outcome follows from its state, unless the deadline cut it.
_WAIT_OUTCOME: Final[dict[str, PendingOutcome]] = {
    "retry_wait": "retry",
    "waiting_for_reset": "retry_after_reset",
}


def valid_recovery_deadline(deadline: object, now: datetime) -> datetime | None:
    """A command's recovery deadline unchanged (None: none), or InvalidCommandError unless
    it is an aware time after `now`."""
    if deadline is None:
        return None
    if not isinstance(deadline, datetime) or deadline.utcoffset() is None or deadline <= now:
        raise InvalidCommandError(
            "recovery_deadline", deadline, f"an aware time after {utc_iso(now)}"
        )
    return deadline


def deadline_reason(deadline: datetime) -> str:
    """The reason of a route the recovery deadline stopped."""
    return f"the recovery deadline {utc_iso(deadline)} is reached, so stop"


def deadline_passed(route: RouteFields, now: datetime) -> bool:
    """Whether the route has a recovery deadline and it has come."""
    return route.recovery_deadline is not None and route.recovery_deadline <= now


def bounded_wait(route: RouteUpdate, now: datetime) -> RouteUpdate:
    """`route` as the recovery deadline lets it be written at `now`: a wait ending past the
    deadline cut to it (pending outcome `stop`), one planned at or after the deadline
    turned into a stop, any other route unchanged."""
    if route.state not in WAITING_STATES or route.deadline is None:
        return route
    limit = route.recovery_deadline
    if limit is not None and limit <= now:
        return route.model_copy(
            update={
                "state": "action_required", "deadline": None, "pending_outcome": "stop",
                "reason": deadline_reason(limit), "circuit": None, "probe_token": None,
                "redeliveries": 0,
            }
        )  # fmt: skip
    if limit is not None and route.deadline > limit:
        return route.model_copy(update={"deadline": limit, "pending_outcome": "stop"})
    restored = _WAIT_OUTCOME[route.state]
    if route.pending_outcome == "stop":  # an earlier cut that no longer applies
        return route.model_copy(update={"pending_outcome": restored})
    return route
