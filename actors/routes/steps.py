"""Building blocks of route transitions: guards, the written state, the history record.

Every transition a route plans is fenced on exactly what it was planned from: the
generation, the state and the attempt ordinal of the snapshot it read. So a plan made
from a snapshot that another writer has since moved on is rejected by Redis, whatever
that writer was (another host during a restart, an rq backstop, a second service).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Final

from actors.errors import InvalidCommandError, InvalidStateError, StaleGenerationError
from actors.routes.circuit_board import REASON_PARKED
from actors.routes.commands import RouteContext
from actors.routes.deadline import bounded_wait, deadline_reason
from actors.routes.eligibility import AllBlocked, Choice, choose_skip
from actors.routes.models import (
    AttemptDecision,
    AttemptRecord,
    CycleRecord,
    RouteFields,
    RouteSnapshot,
    RouteState,
    RouteUpdate,
    Transition,
)
from actors.routes.next_steps import STATE_NEXT_STEP, NextStep
from actors.routes.profiles import RouteProfile
from policy import CycleUsage

MAX_TEXT: Final = 4096

WAITING: Final[frozenset[RouteState]] = frozenset({"retry_wait", "waiting_for_reset"})
# States a report about the running turn may arrive in (switching: the new candidate runs).
REPORTABLE: Final[frozenset[RouteState]] = frozenset({"active", "retrying", "switching"})
LIVE: Final[frozenset[RouteState]] = REPORTABLE | WAITING | {"action_required"}

# Fields that describe a failure; cleared by a success or a fresh start.
FAILURE_CLEARED: Final[dict[str, Any]] = {
    "code": None,
    "error_class": None,
    "rule": None,
    "catalogue_version": None,
    "policy_snapshot": None,
    "retry_ordinal": 0,
    "retry_max": 0,
}


_ROUTE_FIELDS: Final = tuple(RouteFields.model_fields)
# Route fields holding JSON values only ever produced by a model's JSON dump, or read
# back from a validated snapshot: validating them again (deeply) is most of a plan's cost.


def require(snapshot: RouteSnapshot, expected_generation: int, allowed: Iterable[str]) -> None:
    """Raise the typed rejection unless the route is at `expected_generation` and in one
    of `allowed` (checked in that order, as the store checks them). A generation that is
    not an int (`True`, `1.0`, "1") is refused as InvalidCommandError."""
    if type(expected_generation) is not int or expected_generation < 0:
        raise InvalidCommandError("expected_generation", expected_generation, "an integer >= 0")
    allowed = frozenset(allowed)
    if snapshot.generation != expected_generation:
        raise StaleGenerationError(
            snapshot.route_id, expected_generation, snapshot.generation, snapshot.state
        )
    if snapshot.state not in allowed:
        raise InvalidStateError(snapshot.route_id, snapshot.state, allowed, snapshot.generation)


def clip(text: str) -> str:
    """A reason or excerpt within the stored bound."""
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def updated(snapshot: RouteSnapshot, **changes: Any) -> RouteUpdate:
    """The route as `snapshot` has it, with `changes`. The schedule (deadline and pending
    outcome) is dropped unless `changes` sets it again: only a waiting route has one.
    So are the circuit it is parked on or probes and the probe's token: only the steps
    that park or probe (actors/routes/circuit_board.py) set them; and the NotDispatched
    redelivery count, which only the pending attempt's own steps keep."""
    values = {name: getattr(snapshot, name) for name in _ROUTE_FIELDS}
    values.update(
        deadline=None, pending_outcome=None, circuit=None, probe_token=None, redeliveries=0
    )
    values.update(changes)
    return RouteUpdate.model_validate(values)


def expiry(route: RouteUpdate, context: RouteContext) -> int | None:
    """Seconds until the route expires: closed routes and utility routes expire; a
    waiting utility route only after its deadline (a pending schedule never expires)."""
    settings = context.settings
    utility = route.utility
    if route.state == "closed":
        return settings.utility_ttl_s if utility else settings.closed_ttl_s
    if not utility:
        return None
    if route.deadline is None:
        return settings.utility_ttl_s
    until_deadline = (route.deadline - context.now).total_seconds()
    return settings.utility_ttl_s + max(0, math.ceil(until_deadline))


def step(
    snapshot: RouteSnapshot,
    context: RouteContext,
    *,
    cause: str,
    route: RouteUpdate,
    decision: AttemptDecision | None,
    bump: bool = False,
    candidate_id: str | None = None,
    safe_excerpt: str | None = None,
) -> Transition:
    """The transition from `snapshot` to `route`, fenced on the snapshot. With a
    decision, one history record: the generation and attempt ordinal after the step, the
    candidate it concerns (`candidate_id`, else the route's), and the failure, policy
    snapshot, stored profile version, deadline and reason the route now holds.

    Every step sets the route's `next_step` and keeps its waits within its recovery
    deadline (actors/routes/deadline.py): a wait cut there, or a stop once it passed."""
    bounded = bounded_wait(route, context.now)
    if bounded.state != route.state and decision is not None:
        decision = "stop"  # the recovery deadline, not the policy, decided
    route = bounded
    if route.state != snapshot.state or route.next_step is None or decision is not None:
        route = route.model_copy(update={"next_step": next_step_after(route, decision)})
    generation = 1 if snapshot.generation == 0 else snapshot.generation + int(bump)
    attempt = None
    if decision is not None:
        attempt = AttemptRecord(
            generation=generation,
            ordinal=route.attempt_ordinal,
            candidate_id=candidate_id or route.candidate_id,
            code=route.code,
            error_class=route.error_class,
            rule=route.rule,
            catalogue_version=route.catalogue_version,
            policy_snapshot=route.policy_snapshot,
            profile_id=route.profile_id,
            profile_version=route.profile_version,
            decision=decision,
            deadline=route.deadline,
            reason=route.reason,
            safe_excerpt=clip(safe_excerpt) if safe_excerpt else None,
            at=context.now,
        )
    return Transition(
        route_id=snapshot.route_id,
        expected_generation=snapshot.generation,
        allowed_from=frozenset({snapshot.state}),
        expected_ordinal=snapshot.attempt_ordinal,
        cause=cause,
        route=route,
        bump_generation=bump,
        attempt=attempt,
        host_id=context.settings.host_id,
        expire_after_s=expiry(route, context),
    )


def deadline_stop(snapshot: RouteSnapshot, context: RouteContext) -> Transition:
    """A waiting route whose recovery deadline has come stops for manual recovery."""
    assert snapshot.recovery_deadline is not None  # the caller checked deadline_passed
    route = updated(
        snapshot, state="action_required", pending_outcome="stop",
        reason=deadline_reason(snapshot.recovery_deadline),
    )  # fmt: skip
    return step(snapshot, context, cause="recovery_deadline", route=route, decision="stop")


def next_step_after(route: RouteUpdate, decision: AttemptDecision | None) -> NextStep:
    """What the caller does next once `route` is written by a step with `decision`: an
    active route is `done` after a success (the turn went through), `run` otherwise (a
    start, a Resume, a Start fresh, a completed skip: the caller launches the turn)."""
    if route.state == "active" and decision == "success":
        return "done"
    return STATE_NEXT_STEP[route.state]


def skip_step(
    snapshot: RouteSnapshot,
    context: RouteContext,
    *,
    profile: RouteProfile,
    usage: CycleUsage,
    reason: str,
    cause: str,
    decision: AttemptDecision,
    changes: dict[str, Any] | None = None,
    safe_excerpt: str | None = None,
) -> Transition:
    """Leave the current candidate for this cycle: the next eligible one in a new
    generation (state `switching`), or, with none left, `action_required` in this one.
    With circuits known, the next one whose circuits are closed; when all are open, parked
    on one in the new generation, or stopped (actors/routes/eligibility.py)."""
    current = snapshot.candidate_id
    if current is not None:
        usage = replace(usage, skipped=usage.skipped | {current})
    base = {**(changes or {}), "cycle": CycleRecord.from_usage(usage)}
    error_class = base.get("error_class", snapshot.error_class)
    chosen = choose_skip(
        context.circuits, profile, current=current, excluded=usage.skipped,
        error_class=error_class, now=context.now,
    )  # fmt: skip
    if not isinstance(chosen, Choice):
        why = "no eligible candidate is left in this cycle"
        if isinstance(chosen, AllBlocked):
            why = (
                "every remaining candidate's circuit is open longer than its policy waits "
                f"({', '.join(chosen.circuits)})"
            )
        route = updated(
            snapshot,
            **base,
            state="action_required",
            pending_outcome="stop",
            reason=clip(f"{reason}; {why}, so stop"),
        )
        return step(
            snapshot, context, cause=cause, route=route, decision=decision,
            safe_excerpt=safe_excerpt,
        )  # fmt: skip
    following, park = chosen.candidate, chosen.park
    generation = snapshot.generation + 1
    switched = {
        "state": "switching",
        "candidate_id": following.id,
        "candidate_index": following.index,
        "retry_ordinal": 0,
        "retry_max": 0,
        "attempt_ordinal": 0,
        "provider_session_id": None,  # the next candidate's agent has a session of its own
        "pending_outcome": "skip",
        "reason": clip(f"{reason}: {following.id} (generation {generation})"),
    }
    if park is not None:  # its circuit is open: the first attempt there waits on it
        switched |= {
            "state": "retry_wait", "pending_outcome": "retry", "deadline": park.deadline,
            "reason": REASON_PARKED, "circuit": park.circuit,
        }  # fmt: skip
    route = updated(snapshot, **{**base, **switched})
    return step(
        snapshot, context, cause=cause, route=route, decision=decision, bump=True,
        candidate_id=current, safe_excerpt=safe_excerpt,
    )  # fmt: skip
