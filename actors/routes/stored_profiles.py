"""Routes that follow a stored profile (the profile store, actors/store/profile_store.py),
as the pure planner sees them.

A route started by profile id records the id (`profile_id`) and, at each decision, the
stored profile's CURRENT version: the shell reads every profile the round's routes follow
before planning (actors/engine/batch.py, one pipeline, as circuits are read) and hands
them in as a ProfileBoard (RouteContext.profiles); the planner never reads anything.

A decision (a start, a failure, a skip now, a start fresh, a due retry its circuit
outlasts) takes the board's version and
writes it with the route: its copy in `profile` (what the route runs with until its next
decision: its current candidate, its circuits) and its number in `profile_version`, which
every attempt record repeats. Steps that carry out a decision made before (a timer, a
retry now) keep the version of that decision. A profile that cannot be decided from (a
deleted one, a stored document that is invalid or legacy) never authorises work: a
failure, a skip-now and a due attempt stop the route (`action_required`, reason `policy
configuration error, fix the profile: <what to do>`); a start, a start fresh or a resume
on it is refused with the ProfileConfigurationError. A route that follows no stored
profile decides with its own copy, as before.
"""

from __future__ import annotations

from typing import Any, Final

from actors.errors import CorruptProfileError, InvalidCommandError, InvalidIdentifierError
from actors.keys import valid_profile_id
from actors.routes.commands import (
    ReportFailure,
    RouteCommand,
    RouteContext,
    SkipNow,
    Start,
    StartFresh,
)
from actors.routes.models import RouteSnapshot, Transition
from actors.routes.profile_board import ProfileBoard, ProfileRevision
from actors.routes.profile_errors import ProfileConfigurationError, ProfileNotReadError
from actors.routes.profiles import RouteProfile, profile_from_json, profile_json
from actors.routes.steps import clip, step, updated
from catalogue import sanitize

CONFIGURATION_STOP: Final = "policy configuration error, fix the profile"
_UNREADABLE: Final = (
    ProfileConfigurationError, ProfileNotReadError, CorruptProfileError, InvalidCommandError,
    InvalidIdentifierError,
)  # fmt: skip


def revision_of(profile_id: str, profiles: ProfileBoard | None) -> ProfileRevision:
    """The current revision of `profile_id` the round read (module docstring)."""
    if profiles is None:
        raise ProfileNotReadError(profile_id)
    return profiles.revision(profile_id)


def recorded(revision: ProfileRevision) -> dict[str, Any]:
    """The route fields a decision made with `revision` writes."""
    return {
        "profile_id": revision.profile_id,
        "profile_version": revision.version,
        "profile": revision.copy(),
    }


def inline(profile: RouteProfile) -> dict[str, Any]:
    """The route fields of a route given its own profile (it follows no stored one)."""
    return {"profile_id": None, "profile_version": None, "profile": profile_json(profile)}


def decision_profile(
    snapshot: RouteSnapshot, profiles: ProfileBoard | None
) -> tuple[RouteProfile, dict[str, Any]]:
    """The profile a decision of the route is made with, and the route fields that
    record it: a followed profile's current revision, else the route's own (nothing to
    record). Raises ProfileConfigurationError (followed) or CorruptProfileError (own)."""
    if snapshot.profile_id is None:
        return profile_from_json(snapshot.route_id, snapshot.profile), {}
    revision = revision_of(snapshot.profile_id, profiles)
    return revision.profile, recorded(revision)


def require_followable(snapshot: RouteSnapshot, context: RouteContext) -> None:
    """Raise the ProfileConfigurationError of the profile the route follows, if any."""
    if snapshot.profile_id is not None:
        revision_of(snapshot.profile_id, context.profiles)


def given_profile(
    profile: RouteProfile | None, profile_id: str | None, profiles: ProfileBoard | None
) -> tuple[RouteProfile, dict[str, Any]] | None:
    """The profile a Start or a Start fresh names (inline, or by id: its current
    revision) with the route fields that record it; None when it names neither. Both at
    once is InvalidCommandError; a stored one that cannot be decided from raises its
    ProfileConfigurationError (the command is refused)."""
    if profile is not None and profile_id is not None:
        raise InvalidCommandError("profile_id", profile_id, "None when a profile is given")
    if profile is not None:
        return profile, inline(profile)
    if profile_id is None:
        return None
    revision = revision_of(valid_profile_id(profile_id), profiles)
    return revision.profile, recorded(revision)


def configuration_reason(error: ProfileConfigurationError | CorruptProfileError) -> str:
    # the detail may quote a stored document's content: it is stored as the route's reason
    return clip(f"{CONFIGURATION_STOP}: {sanitize(error.detail)}")


def configuration_stop(
    snapshot: RouteSnapshot, context: RouteContext, error: ProfileConfigurationError
) -> Transition:
    """The route stops for manual recovery: its profile cannot be decided from."""
    route = updated(
        snapshot, state="action_required", pending_outcome="stop",
        reason=configuration_reason(error),
    )  # fmt: skip
    return step(snapshot, context, cause="profile_unavailable", route=route, decision="stop")


def choosing_profile(
    command: RouteCommand, snapshot: RouteSnapshot, profiles: ProfileBoard | None
) -> RouteProfile | None:
    """The profile a command that may choose a candidate (a start, a start fresh, a
    failure that may skip, a skip now) chooses from, for the shell's reads before
    planning (the circuits of its candidates); None when it chooses nothing or its
    profile cannot be read (the planner refuses or stops it)."""
    try:
        if isinstance(command, Start | StartFresh):
            given = given_profile(command.profile, command.profile_id, profiles)
            if given is not None:
                return given[0]
            if isinstance(command, Start):
                return None
        elif not isinstance(command, ReportFailure | SkipNow):
            return None
        return decision_profile(snapshot, profiles)[0]
    except _UNREADABLE:
        return None


def followed_ids(command: RouteCommand, snapshot: RouteSnapshot) -> set[str]:
    """The stored profiles a round must read to plan `command` on `snapshot`: the one the
    route follows, and the one a Start or a Start fresh names."""
    wanted = {snapshot.profile_id} if snapshot.profile_id is not None else set()
    named = command.profile_id if isinstance(command, Start | StartFresh) else None
    if isinstance(named, str):
        wanted.add(named)
    return wanted
