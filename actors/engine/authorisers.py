"""Who may cancel a session's transient retry: the orchestrator's authoriser, or the default.

`cancel_transient_retry(task, session, principal)` authorises the task-session pair before
it reads any retry state or notice. The authoriser is the orchestrator's (loaded from
`RECOVERY_AUTHORISER=module:factory`); the default allows a pair when the session's route
recorded that task at its start, whoever the principal is, and its own lookup of that task
is the only read it makes. A denied pair and a foreign one (no such session, another task)
get the same answer: `require_authorised` raises the same NotAuthorisedError for both.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from actors.errors import (
    InvalidIdentifierError,
    NotAuthorisedError,
    StoreUnavailableError,
    error_text,
)
from actors.keys import valid_route_id, valid_task_id

__all__ = ["Authoriser", "RecordedTask", "RecordedTaskAuthoriser", "require_authorised"]

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
