"""Who may cancel a session's transient retry, and who may edit the stored profiles: the
orchestrator's authoriser, or the default.

`cancel_transient_retry(task, session, principal)` authorises the task-session pair before
it reads any retry state or notice. The authoriser is the orchestrator's (loaded from
`RECOVERY_AUTHORISER=module:factory`); the default allows a pair when the session's route
recorded that task at its start, whoever the principal is, and its own lookup of that task
is the only read it makes. A denied pair and a foreign one (no such session, another task)
get the same answer: `require_authorised` raises the same NotAuthorisedError for both.

A profile edit (create, update, delete: actors/engine/profile_edits.py) is authorised by
`authorise_profile_edit(action, profile_id, principal)` before anything is read or
written. The default allows every principal, as it decides a cancel by the task and not
by who asks: whoever reaches the runtime (its Python API, a holder of an API token) may
already start any route with a profile of its own, so refusing the shared ones would
protect nothing. An orchestrator that restricts edits implements the method; one whose
authoriser does not (written before profiles were stored) gets every edit denied, never
allowed by default behind its back (`require_profile_edit` says so).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Final, Protocol, runtime_checkable

from actors.errors import (
    InvalidIdentifierError,
    NotAuthorisedError,
    StoreUnavailableError,
    error_text,
)
from actors.keys import valid_profile_id, valid_route_id, valid_task_id
from actors.routes.profile_errors import ProfileEditDeniedError

__all__ = [
    "PROFILE_ACTIONS", "Authoriser", "ProfileEditAuthoriser", "RecordedTask",
    "RecordedTaskAuthoriser", "require_authorised", "require_profile_edit",
]  # fmt: skip

PROFILE_ACTIONS: Final = ("create", "update", "delete")
"""What a profile edit does, as the authoriser is asked it."""

log = logging.getLogger(__name__)

RecordedTask = Callable[[str], Awaitable[str | None]]
"""`recorded_task(session_id)`: the task id the session's route recorded at its start, or
None (no such route, or it recorded none)."""


@runtime_checkable
class Authoriser(Protocol):
    async def authorise(self, task_id: str, session_id: str, principal: str | None) -> bool:
        """True when `principal` may act on the task's session. False for a pair it may
        not act on and for a pair that does not exist alike."""
        ...


@runtime_checkable
class ProfileEditAuthoriser(Protocol):
    """The profile-edit check an Authoriser may also implement."""

    async def authorise_profile_edit(
        self, action: str, profile_id: str, principal: str | None
    ) -> bool:
        """True when `principal` may `action` ("create", "update" or "delete") the stored
        profile `profile_id`. It is asked before the profile is read or written."""
        ...


class RecordedTaskAuthoriser:
    """The default authoriser: the pair must be the one the route recorded at its start.
    It reads nothing but `recorded_task(session_id)`, and nothing at all for ids that
    could not name a route or a task."""

    def __init__(self, recorded_task: RecordedTask) -> None:
        self._recorded_task = recorded_task

    async def authorise(self, task_id: str, session_id: str, principal: str | None) -> bool:
        try:
            valid_task_id(task_id)
            valid_route_id(session_id)
        except InvalidIdentifierError:
            return False
        recorded = await self._recorded_task(session_id)
        if not isinstance(recorded, str):
            return False
        # Compared in constant time: how long a refusal takes says nothing of the task.
        return hmac.compare_digest(recorded.encode(), task_id.encode())

    async def authorise_profile_edit(
        self, action: str, profile_id: str, principal: str | None
    ) -> bool:
        """Every principal may edit every profile (module docstring: why); an action or
        an id that could name no edit is denied."""
        try:
            valid_profile_id(profile_id)
        except InvalidIdentifierError:
            return False
        return action in PROFILE_ACTIONS


async def require_authorised(
    authoriser: Authoriser, task_id: str, session_id: str, principal: str | None
) -> None:
    """Return when the pair is authorised; raise NotAuthorisedError otherwise. Only the
    boolean True authorises; an authoriser that raises denies (logged), except for
    StoreUnavailableError, which says nothing about the pair and is raised as it is."""
    try:
        allowed = await authoriser.authorise(task_id, session_id, principal)
    except StoreUnavailableError:
        raise
    except Exception as error:  # a foreign pair must not read differently from a denied one
        log.warning("authoriser failed, so the pair is denied: %s", error_text(error))
        allowed = False
    if allowed is not True:
        raise NotAuthorisedError(task_id, session_id)


async def require_profile_edit(
    authoriser: Authoriser | ProfileEditAuthoriser,
    action: str,
    profile_id: str,
    principal: str | None,
) -> None:
    """Return when `principal` may `action` profile `profile_id`; raise
    ProfileEditDeniedError otherwise (an authoriser without `authorise_profile_edit`
    denies every edit). Only the boolean True authorises; an authoriser that raises
    denies (logged), except for StoreUnavailableError, raised as it is."""
    check = getattr(authoriser, "authorise_profile_edit", None)
    if check is None:
        log.warning(
            "the authoriser %s has no authorise_profile_edit, so profile edits are denied",
            type(authoriser).__name__,
        )
        raise ProfileEditDeniedError(profile_id, action, principal)
    try:
        allowed = await check(action, profile_id, principal)
    except StoreUnavailableError:
        raise
    except Exception as error:  # an authoriser's failure never allows an edit
        log.warning("authoriser failed, so the profile edit is denied: %s", error_text(error))
        allowed = False
    if allowed is not True:
        raise ProfileEditDeniedError(profile_id, action, principal)
