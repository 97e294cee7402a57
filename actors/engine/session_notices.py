"""A host's notice lifecycle: the session guards around the notice writer and resolver.

Every operation on a session's notice runs under that session's guard (session_guards.py),
so a write and a retirement of one session never interleave: whichever gets the guard
first finishes its store calls before the other starts. A retirement raises the session's
retired watermark before it lists anything, and a write for an attempt at or below it is
refused before it lists anything, so a cancelled or superseded attempt can never recreate
a retired notice, whichever order they race in. Store calls run under the session's guard
only, never under the host's runtime-state lock (the caller must not hold it).

The counters in `tally` are what the host exports as metrics.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from actors.engine.notices import NOT_LOOKED, NoticeResolver, NoticeWriter, Resolution, WriteOutcome
from actors.engine.session_guards import ExecutionIdentity, SessionGuards
from actors.errors import error_text
from actors.keys import AttemptFence
from actors.routes.notices import RECOVERY_KIND, RETRY_NOTICE_KIND, NoticeContent
from actors.store.transcript import TranscriptMessage, TranscriptPort

__all__ = ["NoticeTally", "SessionNotices"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class NoticeTally:
    """Running counts since the host started (monotonic: export them as counters).

    written: notices created or updated; refused: writes the guard refused (a retired or
    superseded attempt); write_failures: writes a list, create or update failure stopped;
    retired: notices deleted by retirements; duplicates_repaired: extra notices a write
    deleted; cleanup_failures: listings and deletions that failed (at a retirement or a
    write's duplicate repair); recovery_messages / recovery_failures: manual-recovery
    messages created / not created; prompts: accepted prompts (starts and delivered
    dispatches that owned their session); withdrawn: notices created for an attempt the
    route had already left (another process retired it meanwhile), deleted again."""

    written: int = 0
    refused: int = 0
    write_failures: int = 0
    retired: int = 0
    duplicates_repaired: int = 0
    cleanup_failures: int = 0
    recovery_messages: int = 0
    recovery_failures: int = 0
    prompts: int = 0
    withdrawn: int = 0


class SessionNotices:
    """The notice lifecycle of the sessions one host owns."""

    def __init__(
        self, transcript: TranscriptPort, guards: SessionGuards, *, owns_sessions: bool = True
    ) -> None:
        """`owns_sessions`: whether this process owns the sessions it writes for (a route
        host). An rq worker's engine does not: it writes a notice for the owning host's
        session and keeps no reservation of it (the host retires it, and this process's
        guards would never hear of that), so its guard table stays bounded."""
        self.transcript = transcript
        self.guards = guards
        self.owns_sessions = owns_sessions
        self.writer = NoticeWriter(transcript)
        self.resolver = NoticeResolver(transcript)
        self.tally = NoticeTally()

    async def accept_prompt(self, identity: ExecutionIdentity | None) -> bool:
        """Prompt evidence (a start, a delivered dispatch): owns the session again only with
        a complete identity of an attempt that was neither retired nor superseded."""
        if identity is None:
            return False
        async with self.guards.hold(identity.session_id) as held:
            accepted = held.accept_prompt(identity)
        self.tally.prompts += accepted
        return accepted

    async def accept_confirmed(
        self, session_id: str, confirm: Callable[[], Awaitable[ExecutionIdentity | None]]
    ) -> bool:
        """Prompt evidence that must be confirmed first (a delivered dispatch, announced
        after the fact): `confirm()` (a store read: the identity, or None when the evidence
        no longer holds) runs under the session's guard. A transition committed after the
        read has its notice work run after the acceptance (it waits for the guard), so it
        retires what was accepted; one committed before it is what the read sees."""
        async with self.guards.hold(session_id) as held:
            accepted = held.accept_prompt(await confirm())
        self.tally.prompts += accepted
        return accepted

    async def write_attempt(
        self,
        task_id: str,
        attempt: AttemptFence,
        notice: NoticeContent,
        *,
        runs: Callable[[], Awaitable[bool]] | None = None,
    ) -> WriteOutcome:
        """The failure transition that scheduled `attempt` committed: reserve it as the
        session's retry (superseding an earlier one) and write its notice, both under the
        guard. Refused, reading and writing nothing, for a retired or superseded attempt.

        `runs()` (a store read: whether the route still runs `attempt`) is asked after a
        create: when the route has moved on, a retirement in another process may have
        listed the transcript before the create landed, so the new notice is withdrawn
        and the attempt retired here too (notices.py)."""
        if notice.kind != RETRY_NOTICE_KIND:
            raise ValueError(f"a retry notice has kind {RETRY_NOTICE_KIND!r}, not {notice.kind!r}")
        async with self.guards.hold(attempt.route_id) as held:
            reservation = held.reserve_retry(attempt)
            if not reservation.reserved:
                self.tally.refused += 1
                return WriteOutcome("refused")
            outcome = await self.writer.write(
                task_id, attempt.route_id, notice.content, notice.metadata
            )
            if outcome.status == "created" and runs is not None and not await runs():
                outcome = await self.writer.withdraw(task_id, attempt, outcome)
                held.retire(attempt)  # over, though this process saw no transition end it
            elif not self.owns_sessions:
                held.release_retry(attempt)
        self.tally.withdrawn += outcome.status == "withdrawn"
        self.tally.written += outcome.written
        self.tally.write_failures += outcome.status == "failed"
        self.tally.duplicates_repaired += outcome.duplicates_deleted
        self.tally.cleanup_failures += outcome.duplicates_failed
        return dataclasses.replace(outcome, superseded=reservation.superseded)

    async def arm_retry(self, attempt: AttemptFence) -> bool:
        """The failed turn of `attempt` completed and the session waits for input: True when
        `attempt` is still the session's reserved retry (arm its timer then, not before)."""
        async with self.guards.hold(attempt.route_id) as held:
            return held.arm_retry(attempt)

    async def retire(
        self,
        task_id: str,
        session_id: str,
        *,
        attempt: AttemptFence | None = None,
        force: bool = False,
    ) -> Resolution:
        """Retry ownership ended (success, exhaustion, a terminal event, a stop, a cancel,
        shutdown): clear the session's ownership, raise its watermark to `attempt` and
        delete its notices. `attempt` is the attempt the ending transition ended: the
        route's (generation, attempt ordinal) in the snapshot that transition was planned
        from (a skip's new generation is not retired). Transitions are serial, so every
        attempt whose notice could still be written is at or below it; a later attempt's
        retry that reached the guard first keeps the session and its notice
        (HeldSession.retire), and nothing is read then. Otherwise, without `force` (a
        normal success) the transcript is read only when a retry was ended; stop,
        terminal and cancel paths force it, since a notice can outlive its timer or
        process. None (shutdown, a stop naming no attempt) retires whatever owns it."""
        async with self.guards.hold(session_id) as held:
            retirement = held.retire(attempt)
            if retirement.retry_remains or not (force or retirement.had_retry):
                return NOT_LOOKED
            resolution = await self.resolver.retire(task_id, session_id)
        self._count(resolution)
        return resolution

    async def delete_session(
        self, task_id: str, session_id: str, *, attempt: AttemptFence | None = None
    ) -> Resolution:
        """The session is deleted: the same retirement (always reading the transcript),
        then its entry refuses everything until the late-event fence expires."""
        async with self.guards.hold(session_id) as held:
            held.close(attempt)
            resolution = await self.resolver.retire(task_id, session_id)
        self._count(resolution)
        return resolution

    async def post_recovery(
        self, task_id: str, session_id: str, message: NoticeContent
    ) -> TranscriptMessage | None:
        """Create the manual-recovery message of a cancelled active loop (after its
        retirement); a failure is logged and answers None (the cancel itself stands)."""
        if message.kind != RECOVERY_KIND:
            raise ValueError(f"a recovery message has kind {RECOVERY_KIND!r}, not {message.kind!r}")
        try:
            created = await self.transcript.create_message(
                task_id, session_id, kind=message.kind, content=message.content,
                metadata=message.metadata,
            )  # fmt: skip
        except Exception as error:  # any port's failure: the cancel is not undone by it
            self.tally.recovery_failures += 1
            log.warning("recovery message of task %r session %r not created: %s",
                        task_id, session_id, error_text(error))  # fmt: skip
            return None
        self.tally.recovery_messages += 1
        return created

    def _count(self, resolution: Resolution) -> None:
        self.tally.retired += resolution.deleted
        self.tally.cleanup_failures += resolution.failed + (not resolution.listed)
