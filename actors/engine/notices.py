"""Writing and retiring a session's one retry notice through the transcript port.

`NoticeWriter.write` keeps one `retrying: true` status message per task session, reused
across attempts: it lists the session's transcript, keeps the status messages whose metadata
has the boolean `retrying: true` (not "true", not 1) for the exact task and session; with
none it creates one, once; otherwise it keeps the newest by (created_at, id) — so legacy
duplicates leave the live notice inside the newest hydration window — replaces its content
and metadata through an update (id, creation time and turn unchanged) and, only after that
update succeeded, deletes the other matches (which repairs duplicates). A list or update
failure is logged and swallowed with no fallback insert (an insert beside a notice the list
could not see would be a duplicate); a failed duplicate deletion is left for the next write
or the retirement.

A notice is written after its transition committed, by the process that committed it:
the owning host, or an rq worker's engine (a NotDispatched redelivery, a backstop's
re-park). A process's session guard orders only its own calls, so a write that lists the
transcript after another process's retirement would create the notice again; the
writer's caller reads the route after a create and `NoticeWriter.withdraw` deletes the
new notice when the route no longer runs its attempt. A retirement lists after its
transition committed, so whichever comes second of it and that read sees the other: a
cancelled or superseded attempt's notice never outlives its write. (An update cannot
recreate anything: it fails on a deleted message.)

`NoticeResolver.retire` ends the notice when retry ownership ends: it deletes every
`retrying: true` message of the task session (any kind), continuing past individual
failures so one corrupt or racing message cannot keep the others alive. Failures are
logged and swallowed: a cleanup never turns a successful transition into a failure.

Deletion, never `retrying: false`: a renderer would show a settled retry message with a
stale Cancel action. Neither class holds any lock: the session guard (session_notices.py)
orders a session's writes and retirements.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from actors.errors import error_text
from actors.keys import AttemptFence
from actors.routes.notices import RETRY_NOTICE_KIND
from actors.store.transcript import TranscriptMessage, TranscriptPort

__all__ = ["NoticeResolver", "NoticeWriter", "Resolution", "WriteOutcome", "is_retrying"]

log = logging.getLogger(__name__)

WriteStatus = Literal["created", "updated", "failed", "refused", "withdrawn"]
FailedStep = Literal["list", "create", "update"]


def is_retrying(message: TranscriptMessage) -> bool:
    """Whether the message's metadata holds the boolean `retrying: true` (exactly True)."""
    return message.metadata.get("retrying") is True


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What one notice write did. `created`/`updated`: the notice is `message`; `failed`:
    `failed_step` raised (logged; nothing inserted in its place); `refused`: the session's
    guard refused the attempt (retired or superseded) and nothing was read or written.
    `duplicates_deleted`/`duplicates_failed` count the other notices the write removed or
    could not remove. `superseded`: the earlier retry attempt the write's reservation
    replaced (SessionNotices sets it; the host cancels that attempt's timer). `withdrawn`:
    the notice was created, then deleted again because the route no longer ran its attempt
    (`NoticeWriter.withdraw`)."""

    status: WriteStatus
    message: TranscriptMessage | None = None
    failed_step: FailedStep | None = None
    duplicates_deleted: int = 0
    duplicates_failed: int = 0
    superseded: AttemptFence | None = None

    @property
    def written(self) -> bool:
        return self.status in ("created", "updated")


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one retirement did: whether the transcript was `looked` up and `listed`,
    how many notices it `deleted` and how many deletions `failed`."""

    looked: bool
    listed: bool = False
    deleted: int = 0
    failed: int = 0

    @property
    def clean(self) -> bool:
        """Every notice the list showed is gone (or there was no need to look)."""
        return not self.looked or (self.listed and self.failed == 0)


NOT_LOOKED = Resolution(looked=False)


class NoticeWriter:
    """The attempt-write path of one transcript port."""

    def __init__(self, transcript: TranscriptPort) -> None:
        self.transcript = transcript

    async def write(
        self, task_id: str, session_id: str, content: str, metadata: dict[str, JsonValue]
    ) -> WriteOutcome:
        """Create or reuse the session's notice with `content` and `metadata` (which must
        hold `retrying: true`, or the notice could never be found again)."""
        if metadata.get("retrying") is not True:
            raise ValueError("a retry notice's metadata must hold the boolean retrying: true")
        where = f"task {task_id!r} session {session_id!r}"
        try:
            listed = await self.transcript.list_session_messages(task_id, session_id)
        except Exception as error:  # any port's failure: logged, no fallback insert
            log.warning("retry notice of %s not written: list failed: %s", where, error_text(error))
            return WriteOutcome("failed", failed_step="list")
        matches = [
            m for m in listed
            if m.task_id == task_id and m.session_id == session_id
            and m.kind == RETRY_NOTICE_KIND and is_retrying(m)
        ]  # fmt: skip
        if not matches:
            return await self._create(task_id, session_id, content, metadata, where)
        keep = max(matches, key=lambda m: (m.created_at, m.id))
        try:
            updated = await self.transcript.update_message(keep.id, content, metadata)
        except Exception as error:  # logged; a later write or the retirement repairs it
            log.warning("retry notice %s of %s not updated: %s", keep.id, where, error_text(error))
            return WriteOutcome("failed", failed_step="update")
        deleted, failed = await _delete_each(
            self.transcript, [m for m in matches if m.id != keep.id], where
        )
        return WriteOutcome(
            "updated", updated, duplicates_deleted=deleted, duplicates_failed=failed
        )

    async def _create(
        self, task_id: str, session_id: str, content: str, metadata: dict[str, JsonValue],
        where: str,
    ) -> WriteOutcome:  # fmt: skip
        try:
            created = await self.transcript.create_message(
                task_id, session_id, kind=RETRY_NOTICE_KIND, content=content, metadata=metadata
            )
        except Exception as error:  # once only: a timed-out create may have landed
            log.warning("retry notice of %s not created: %s", where, error_text(error))
            return WriteOutcome("failed", failed_step="create")
        return WriteOutcome("created", created)

    async def withdraw(
        self, task_id: str, attempt: AttemptFence, created: WriteOutcome
    ) -> WriteOutcome:
        """Delete the notice `created` made for `attempt` when it still shows that attempt:
        the route had moved on before the create landed, so a retirement may have listed
        the transcript before it (another process's, whose session guard this one cannot
        see). A notice another writer has since made show a later attempt is that
        attempt's, and stays. Failures are logged: a later write or cleanup repairs."""
        if created.message is None:
            return created
        where = f"task {task_id!r} session {attempt.route_id!r}"
        try:
            listed = await self.transcript.list_session_messages(task_id, attempt.route_id)
            mine = [m for m in listed if m.id == created.message.id and shows(m, attempt)]
        except Exception as error:  # logged; the next cleanup lists again
            log.warning("stale retry notice of %s not withdrawn: %s", where, error_text(error))
            return dataclasses.replace(created, duplicates_failed=created.duplicates_failed + 1)
        if not mine:
            return created
        _deleted, failed = await _delete_each(self.transcript, mine, where)
        status: WriteStatus = "withdrawn" if failed == 0 else "created"
        failures = created.duplicates_failed + failed
        return dataclasses.replace(created, status=status, duplicates_failed=failures)


def shows(message: TranscriptMessage, attempt: AttemptFence) -> bool:
    """Whether the notice's metadata shows `attempt` (its generation and attempt ordinal)."""
    metadata = message.metadata
    return (metadata.get("generation"), metadata.get("attempt_ordinal")) == (
        attempt.generation, attempt.ordinal,
    )  # fmt: skip


class NoticeResolver:
    """The retirement path of one transcript port."""

    def __init__(self, transcript: TranscriptPort) -> None:
        self.transcript = transcript

    async def retire(self, task_id: str, session_id: str) -> Resolution:
        """Delete every `retrying: true` message of the task session; failures logged."""
        where = f"task {task_id!r} session {session_id!r}"
        try:
            listed = await self.transcript.list_session_messages(task_id, session_id)
        except Exception as error:  # logged; a later authorised cleanup tries again
            log.warning(
                "retry notices of %s not retired: list failed: %s", where, error_text(error)
            )
            return Resolution(looked=True)
        notices = [
            m for m in listed
            if m.task_id == task_id and m.session_id == session_id and is_retrying(m)
        ]  # fmt: skip
        deleted, failed = await _delete_each(self.transcript, notices, where)
        return Resolution(looked=True, listed=True, deleted=deleted, failed=failed)


async def _delete_each(
    transcript: TranscriptPort, messages: list[TranscriptMessage], where: str
) -> tuple[int, int]:
    """Delete each message, going on past failures: (deleted, failed)."""
    deleted = failed = 0
    for message in messages:
        try:
            await transcript.delete_message(message.id)
        except Exception as error:  # one bad message never keeps the others alive
            failed += 1
            log.warning(
                "retry notice %s of %s not deleted: %s", message.id, where, error_text(error)
            )
        else:
            deleted += 1
    return deleted, failed
