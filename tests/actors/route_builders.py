"""Transitions for route-store tests, written the way a route actor would write them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final

from actors.routes.models import (
    AttemptRecord,
    RouteSnapshot,
    RouteState,
    RouteUpdate,
    Transition,
)
from catalogue.codes import CATALOGUE_VERSION, ErrorClass

T0: Final = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RULE: Final = "anthropic.http.529.v1"


def policy(initial_interval_seconds: int) -> dict[str, Any]:
    """A v1 policy document's JSON, as a route would snapshot it."""
    return {
        "version": 1,
        "transient": {
            "retry": {
                "enabled": True,
                "max_retries": 3,
                "initial_interval_seconds": initial_interval_seconds,
            },
            "wait_for_reset": {"enabled": False, "max_wait_seconds": 0},
            "on_exhausted": "skip",
        },
        "hard": {
            "retry": {"enabled": False, "max_retries": 0, "initial_interval_seconds": 0},
            "wait_for_reset": {"enabled": True, "max_wait_seconds": 3600},
            "on_exhausted": "stop",
        },
    }


def start(
    route_id: str,
    *,
    caller: str = "kanban",
    host_id: str | None = None,
    at: datetime = T0,
) -> Transition:
    """A new route on its first candidate: none -> active, generation 1."""
    return Transition(
        route_id=route_id,
        expected_generation=0,
        allowed_from=frozenset({"none"}),
        cause="start",
        route=RouteUpdate(
            state="active", candidate_id="claude", candidate_index=0, caller=caller,
            invocation_id=f"inv-{route_id}",
        ),
        attempt=AttemptRecord(
            generation=1, ordinal=0, candidate_id="claude", decision="start", at=at
        ),
        host_id=host_id,
    )  # fmt: skip


def retry_wait(
    route_id: str,
    generation: int,
    *,
    deadline: datetime,
    ordinal: int = 1,
    interval_s: int = 5,
    reason: str = "provider overloaded",
    allowed_from: frozenset[RouteState] = frozenset({"active", "retrying"}),
    at: datetime = T0,
) -> Transition:
    """A transient failure with retry budget: -> retry_wait until `deadline`."""
    snapshot = policy(interval_s)
    failure: dict[str, Any] = {
        "candidate_id": "claude", "code": "provider_overloaded",
        "error_class": ErrorClass.TRANSIENT, "rule": RULE,
        "catalogue_version": CATALOGUE_VERSION, "policy_snapshot": snapshot,
        "deadline": deadline, "reason": reason,
    }  # fmt: skip
    return Transition(
        route_id=route_id,
        expected_generation=generation,
        allowed_from=allowed_from,
        cause="report_failure",
        route=RouteUpdate(
            state="retry_wait", candidate_index=0, retry_ordinal=ordinal, retry_max=3,
            attempt_ordinal=ordinal, pending_outcome="retry", caller="kanban",
            invocation_id=f"inv-{route_id}",
            **failure,
        ),
        attempt=AttemptRecord(
            generation=generation, ordinal=ordinal, decision="retry", at=at, **failure
        ),
    )  # fmt: skip


def deadline_reached(route_id: str, generation: int, *, ordinal: int = 1) -> Transition:
    """The timer fired on a current generation: retry_wait -> retrying, schedule cleared."""
    return Transition(
        route_id=route_id,
        expected_generation=generation,
        allowed_from=frozenset({"retry_wait", "waiting_for_reset"}),
        cause="timer",
        route=RouteUpdate(
            state="retrying", candidate_id="claude", candidate_index=0, retry_ordinal=ordinal,
            retry_max=3, attempt_ordinal=ordinal, caller="kanban", reason="deadline reached",
        ),
    )  # fmt: skip


def skip_now(route_id: str, generation: int, *, reason: str = "skip now") -> Transition:
    """A manual skip: the next candidate in a new generation."""
    return Transition(
        route_id=route_id,
        expected_generation=generation,
        allowed_from=frozenset({"retry_wait", "waiting_for_reset", "active"}),
        cause="manual",
        bump_generation=True,
        route=RouteUpdate(
            state="switching", candidate_id="codex", candidate_index=1, caller="kanban",
            reason=reason,
        ),
        attempt=AttemptRecord(
            generation=generation + 1, ordinal=0, candidate_id="codex", decision="skip_now",
            reason=reason, at=T0,
        ),
    )  # fmt: skip


def cancel_wait(route_id: str, generation: int) -> Transition:
    """A manual cancel of a pending wait: -> action_required, schedule cleared."""
    return Transition(
        route_id=route_id,
        expected_generation=generation,
        allowed_from=frozenset({"retry_wait", "waiting_for_reset"}),
        cause="manual",
        route=RouteUpdate(
            state="action_required", candidate_id="claude", candidate_index=0,
            caller="kanban", reason="wait cancelled",
        ),
        attempt=AttemptRecord(
            generation=generation, ordinal=0, candidate_id="claude", decision="cancel_wait",
            reason="wait cancelled", at=T0,
        ),
    )  # fmt: skip


def close(route_id: str, generation: int, *, host_id: str | None = None) -> Transition:
    return Transition(
        route_id=route_id,
        expected_generation=generation,
        allowed_from=frozenset({"active", "action_required", "retry_wait"}),
        cause="manual",
        route=RouteUpdate(state="closed", reason="closed by the user"),
        attempt=AttemptRecord(generation=generation, ordinal=0, decision="close", at=T0),
        host_id=host_id,
        expire_after_s=3600,
    )


def in_seconds(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def expected_snapshot(transition: Transition, *, at: datetime = T0) -> RouteSnapshot:
    """What a read of the route must return once `transition` is applied."""
    return RouteSnapshot(
        route_id=transition.route_id,
        generation=transition.generation,
        updated_at=at,
        **transition.route.model_dump(),
    )
