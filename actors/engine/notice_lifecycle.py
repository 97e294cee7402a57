"""`RouteNotices`: what a route's committed transitions do to its session's transcript.

A session is a route; routes started with a `task_id` have transcript notices (others have
none). After each round of transitions is durable and its route locks are released (store
calls never run under them; actors/engine/batch.py calls `committed`), in commit order per
route, through the session guards of SessionNotices (actors/engine/session_notices.py):

- a start is an accepted prompt (the session is owned), and so is a delivered dispatch
  (`delivered`: the dispatch job's ledger says the dispatcher took the attempt; the job
  announces it on the owning host's wake stream, actors/store/wakes.py, and the host
  accepts it once Redis confirms the route is still retrying that attempt);
- a transition that leaves the route waiting for an attempt with a deadline (a retry, a
  reset wait, a park on a circuit, a release slot) writes that attempt's one notice, the
  same message reused from attempt N to N+1 (update, not insert), fenced on the attempt:
  a retired or superseded attempt never writes;
- a transition that ends retry ownership retires every notice of the session: a success
  or a skip onto a candidate that runs now (`active`), a stop, exhaustion or cancel
  (`action_required`), a close. A success after a retry or a wait (known from the durable
  state before it, so a host restart loses nothing) and every non-success end always read
  the transcript; a success of a turn with no retry reads it only when the session's guard
  still owns a retry entry;
- `retrying` (the attempt is being dispatched) leaves the notice as it is: the retry is
  still owned until the attempt's outcome is reported.

Transitions written by rq jobs (a backstop's fire, a dispatch's outcome) go through the
worker engine's own RouteNotices, with the same rules.

`cancel_transient_retry` is the authorised cancel: the task-session pair is authorised
before anything else is read, then the session's notices are always retired; with an
active loop the route first moves to `action_required` and a manual-recovery message
(Resume, Start fresh) is created.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from actors.engine.authorisers import Authoriser, require_authorised
from actors.engine.session_guards import ExecutionIdentity
from actors.engine.session_notices import SessionNotices
from actors.errors import CorruptProfileError, RecoveryError, TransitionRejectedError, error_text
from actors.keys import AttemptFence
from actors.routes.commands import CancelWait, RouteCommand, Start, StopRoute
from actors.routes.models import WAITING_STATES, RouteSnapshot, attempt_retrying
from actors.routes.notices import RecoveryFacts, RetryFacts, recovery_message, retry_notice
from actors.routes.profiles import ConcreteProfile, profile_from_json

__all__ = ["CANCEL_CONCURRENCY", "CancelOutcome", "Committed", "RouteNotices"]

log = logging.getLogger(__name__)

ENDING_STATES = frozenset({"active", "action_required", "closed"})
LOOP_STATES = frozenset({*WAITING_STATES, "retrying"})
CANCEL_ATTEMPTS = 3
CANCEL_CONCURRENCY = 8
"""Cancels one process carries out at once; the rest wait their turn. A cancel is a few
single reads and writes, not a batch: a burst of a thousand (a fleet's users pressing
Cancel) would otherwise wait on the route store's bounded pool (16 connections) all at
once, time out there and starve the batches of reports beside them."""

RunCommand = Callable[[str, RouteCommand], Awaitable[RouteSnapshot]]
ReadSnapshot = Callable[[str], Awaitable[RouteSnapshot]]


@dataclass(frozen=True, slots=True)
class Committed:
    """One applied transition: the command, the route before it and the route after."""

    command: RouteCommand
    before: RouteSnapshot
    after: RouteSnapshot


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What a cancel did: `active` whether a retry loop was running (it is stopped now, and
    a recovery message was created); `snapshot` the route after the cancel."""

    active: bool
    snapshot: RouteSnapshot


class RouteNotices:
    def __init__(
        self, notices: SessionNotices, authoriser: Authoriser, *, read: ReadSnapshot | None = None
    ) -> None:
        """Notices through `notices` (the host's session guards and transcript port); cancels
        authorised by `authoriser`. `read` (the store's snapshot read) checks, after a
        notice was created, that the route still runs its attempt (SessionNotices.
        write_attempt); None skips the check (one process writing alone)."""
        self.notices = notices
        self.authoriser = authoriser
        self._read = read
        self._cancels = asyncio.Semaphore(CANCEL_CONCURRENCY)

    async def committed(self, changes: Sequence[Committed]) -> None:
        """Follow a round's applied transitions (one per route): each route's notice work
        in turn, different routes concurrently. Never raises: a transcript failure never
        turns a durable transition into an error (it is logged and counted)."""
        results = await asyncio.gather(
            *(self._follow(change) for change in changes if change.after.task_id is not None),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, Exception):
                log.warning("a transcript notice was not followed: %s", error_text(result))

    async def _follow(self, change: Committed) -> None:
        before, after = change.before, change.after
        task = after.task_id
        assert task is not None  # filtered by committed
        if isinstance(change.command, Start):
            identity = ExecutionIdentity.of(
                task_id=task, session_id=after.route_id, execution_id=after.invocation_id,
                generation=after.generation, attempt_ordinal=after.attempt_ordinal,
            )  # fmt: skip
            await self.notices.accept_prompt(identity)
        elif after.state in ENDING_STATES or after.generation != before.generation:
            force = after.state != "active" or before.state in LOOP_STATES
            await self.notices.retire(task, after.route_id, attempt=_fence(before), force=force)
        if after.state in WAITING_STATES and after.deadline is not None and _moved(before, after):
            attempt = _fence(after)
            notice = retry_notice(_facts(after))
            written = await self.notices.write_attempt(
                task, attempt, notice, runs=self._runs(attempt)
            )
            if written.status not in ("refused", "withdrawn"):
                await self.notices.arm_retry(attempt)

    def _runs(self, attempt: AttemptFence) -> Callable[[], Awaitable[bool]] | None:
        """Whether the route still runs `attempt` (waits for it, or dispatched it), read
        from the store; a failed read answers True (the notice stays: a later cleanup
        repairs)."""
        read = self._read
        if read is None:
            return None

        async def runs() -> bool:
            try:
                snapshot = await read(attempt.route_id)
            except RecoveryError as error:
                log.warning("route %s not read after its notice: %s",
                            attempt.route_id, error_text(error))  # fmt: skip
                return True
            current = (snapshot.generation, snapshot.attempt_ordinal)
            return snapshot.state in LOOP_STATES and current == (
                attempt.generation,
                attempt.ordinal,
            )

        return runs

    async def delivered(self, attempts: Sequence[AttemptFence], read: ReadSnapshot) -> None:
        """The dispatches of `attempts` were delivered: each is its session's accepted
        prompt, if the route (read with `read`, under the session's guard) is still
        `retrying` that attempt and has a task. The announcement may arrive after the
        attempt's outcome was reported, or after its session's entry was reclaimed: the
        read refuses it then, as the guard refuses a retired or superseded attempt, so a
        late delivery never owns a session again. Never raises (failures are logged)."""
        results = await asyncio.gather(
            *(self._delivered(attempt, read) for attempt in attempts), return_exceptions=True
        )
        for result in results:
            if isinstance(result, Exception):
                log.warning("a delivered dispatch was not followed: %s", error_text(result))

    async def _delivered(self, attempt: AttemptFence, read: ReadSnapshot) -> bool:
        async def confirmed() -> ExecutionIdentity | None:
            snapshot = await read(attempt.route_id)
            if snapshot.task_id is None or not attempt_retrying(snapshot, attempt):
                return None
            return ExecutionIdentity.of(
                task_id=snapshot.task_id, session_id=attempt.route_id,
                execution_id=snapshot.invocation_id, generation=attempt.generation,
                attempt_ordinal=attempt.ordinal,
            )  # fmt: skip

        return await self.notices.accept_confirmed(attempt.route_id, confirmed)

    async def cancel_transient_retry(
        self,
        task_id: str,
        session_id: str,
        principal: str | None,
        *,
        read: ReadSnapshot,
        run: RunCommand,
    ) -> CancelOutcome:
        """Cancel the session's transient retry (module docstring): NotAuthorisedError,
        the same for a denied and a foreign pair, before anything is read. At most
        CANCEL_CONCURRENCY at once."""
        async with self._cancels:
            return await self._cancel(task_id, session_id, principal, read=read, run=run)

    async def _cancel(
        self,
        task_id: str,
        session_id: str,
        principal: str | None,
        *,
        read: ReadSnapshot,
        run: RunCommand,
    ) -> CancelOutcome:
        await require_authorised(self.authoriser, task_id, session_id, principal)
        snapshot, stopped = await _stopped(session_id, read, run)
        active = stopped is not None
        await self.notices.retire(task_id, session_id, attempt=_fence(snapshot), force=True)
        if not active:
            return CancelOutcome(False, snapshot)
        facts = RecoveryFacts(
            snapshot.code, provider_of(snapshot), snapshot.generation, snapshot.attempt_ordinal
        )
        await self.notices.post_recovery(task_id, session_id, recovery_message(facts))
        assert stopped is not None
        return CancelOutcome(True, stopped)


async def _stopped(
    session_id: str, read: ReadSnapshot, run: RunCommand
) -> tuple[RouteSnapshot, RouteSnapshot | None]:
    """The route as the cancel found it, and after the cancel stopped its retry loop (None:
    no loop was running). A route that moved on between the read and the stop (a report
    landed) is read again; the stop is idempotent."""
    for _ in range(CANCEL_ATTEMPTS - 1):
        snapshot = await read(session_id)
        if snapshot.state not in LOOP_STATES:
            return snapshot, None
        try:
            return snapshot, await run(session_id, _stop_of(snapshot))
        except TransitionRejectedError:
            continue
    snapshot = await read(session_id)
    if snapshot.state not in LOOP_STATES:
        return snapshot, None
    return snapshot, await run(session_id, _stop_of(snapshot))


def _stop_of(snapshot: RouteSnapshot) -> RouteCommand:
    """A waiting route's wait is cancelled; a dispatched attempt's route is stopped."""
    if snapshot.state in WAITING_STATES:
        return CancelWait(snapshot.generation)
    return StopRoute(snapshot.generation)


def _fence(snapshot: RouteSnapshot) -> AttemptFence:
    return AttemptFence(snapshot.route_id, max(1, snapshot.generation), snapshot.attempt_ordinal)


def _moved(before: RouteSnapshot, after: RouteSnapshot) -> bool:
    """Whether the notice must show something new: another attempt, or a new deadline."""
    return (
        before.state not in WAITING_STATES
        or (before.generation, before.attempt_ordinal) != (after.generation, after.attempt_ordinal)
        or before.deadline != after.deadline
    )


def _facts(snapshot: RouteSnapshot) -> RetryFacts:
    assert snapshot.deadline is not None  # a waiting route has its deadline
    retry_max = max(snapshot.retry_max, snapshot.retry_ordinal)
    return RetryFacts(
        code=snapshot.code, provider=provider_of(snapshot), retry_ordinal=snapshot.retry_ordinal,
        retry_max=retry_max, deadline=snapshot.deadline, generation=snapshot.generation,
        attempt_ordinal=snapshot.attempt_ordinal,
    )  # fmt: skip


def provider_of(snapshot: RouteSnapshot) -> str | None:
    """The provider of the route's current candidate, from its stored profile (None when
    the profile names none or cannot be read)."""
    try:
        profile = profile_from_json(snapshot.route_id, snapshot.profile)
    except CorruptProfileError:
        return None
    if isinstance(profile, ConcreteProfile):
        return profile.provider or None
    found = next((c for c in profile.candidates if c.id == snapshot.candidate_id), None)
    return None if found is None else (found.provider or None)
