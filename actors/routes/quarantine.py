"""Quarantine: a route whose stored data is corrupt stops, and nothing else does.

A reader that cannot decode a route's hash (or its schedule hash) raises
CorruptRouteError naming the key and field. Whoever meets it while carrying out a command
(the batch runner, a timer's or a backstop's fire, a host's rehydration, reconciliation)
plans the route's quarantine instead of failing: `action_required` with the reason
`corrupt: <key> <field>: <detail>`, its schedule cleared, a history record with a
sanitised excerpt of the bad text, an event — one transition through the one write path.

Corrupt data has no generation, state or ordinal to trust, so the quarantine is fenced on
the corrupt field itself: it applies only while that field still holds the text it was
planned from, which every other transition rewrites. The written route keeps
what could be read (candidate, profile if readable, caller...) and drops the rest: once
quarantined the route reads again, and leaves `action_required` as any stopped route does
(Start fresh with a profile, Resume, Stop/close). A route whose generation could not be
read is quarantined at generation 1 (its stored one is lost).
"""

from __future__ import annotations

from typing import Final

from actors.errors import CorruptRouteError
from actors.routes.commands import Quarantine, RouteContext
from actors.routes.models import RouteSnapshot, StoredField, Transition
from actors.routes.steps import step, updated
from catalogue.sanitize import sanitize

CAUSE: Final = "quarantine"
EXCERPT_CHARS: Final = 200


def quarantine_of(error: CorruptRouteError) -> Quarantine:
    """The command that quarantines the route `error` found corrupt."""
    excerpt = sanitize(error.stored[:EXCERPT_CHARS]) if error.stored else None
    return Quarantine(error.where, error.field, error.stored, error.reason, excerpt)


def salvaged_of(error: CorruptRouteError) -> RouteSnapshot:
    """What could be read of the route (all defaults when nothing could)."""
    found = error.salvaged
    if isinstance(found, RouteSnapshot):
        return found
    return RouteSnapshot.absent(error.route_id)


def quarantine_transition(
    snapshot: RouteSnapshot, command: Quarantine, context: RouteContext
) -> Transition | None:
    """The route stops with the corruption as its reason; a route never written (a
    schedule left without its route) has nothing to stop and is left to its fence."""
    if snapshot.state == "none" and command.where == "schedule":
        return None
    route = updated(
        snapshot, state="action_required", pending_outcome="stop", reason=command.reason[:4096]
    )
    planned = step(
        snapshot, context, cause=CAUSE, route=route, decision="quarantine",
        safe_excerpt=command.excerpt,
    )  # fmt: skip
    guard = StoredField(
        where="schedule" if command.where == "schedule" else "route",
        field=command.field[:256] or "?",
        text=command.stored,
    )
    return planned.model_copy(update={"unchanged": guard, "expected_ordinal": None})
