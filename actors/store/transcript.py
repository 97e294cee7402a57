"""The transcript port: what the runtime needs of a task service's session transcript.

An orchestrator with its own task service implements `TranscriptPort` against it (loaded
from `RECOVERY_TRANSCRIPT=module:factory`); `RedisTranscript`
(actors/store/redis_transcript.py) is the default. The runtime only ever writes two kinds of
message through it: the one `retrying: true` status notice of a session's retry loop, and
the manual-recovery message of a cancelled loop. Every change is published to the
session's viewers by the port (the Redis one as `session.message.updated`, an upsert by id,
and `session.message.deleted` on its own stream).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, JsonValue, StringConstraints

from actors.keys import MessageId, RouteId, TaskId
from actors.routes.models import UtcDatetime

__all__ = [
    "MAX_CONTENT_CHARS",
    "MessageKind",
    "TranscriptEvent",
    "TranscriptMessage",
    "TranscriptPort",
    "new_message_id",
]

MAX_CONTENT_CHARS = 16_384

MessageKind = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")]
"""A message's kind: `status` (a retry notice), `recovery` (the manual-recovery message),
or whatever kinds the orchestrator's own transcript holds besides."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class TranscriptMessage(BaseModel):
    """One message of a task's session transcript. `id`, `created_at` and `turn_id` never
    change once it exists; `content` and `metadata` change through updates."""

    model_config = _FROZEN

    id: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    task_id: TaskId
    session_id: RouteId
    created_at: UtcDatetime
    kind: MessageKind
    content: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)]
    metadata: dict[str, JsonValue]
    turn_id: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None


class TranscriptEvent(BaseModel):
    """One change on the transcript stream: an upsert carries the whole message, a
    deletion only its id, task and session."""

    model_config = _FROZEN

    event_id: str
    event: Literal["session.message.updated", "session.message.deleted"]
    message_id: MessageId
    task_id: TaskId
    session_id: RouteId
    message: TranscriptMessage | None = None


@runtime_checkable
class TranscriptPort(Protocol):
    """A task service's session transcript. Every method raises on failure (the Redis
    one StoreUnavailableError); the notice writer and resolver log and swallow that."""

    async def list_session_messages(self, task_id: str, session_id: str) -> list[TranscriptMessage]:
        """Every message of the task's session (any kind), oldest first."""
        ...

    async def create_message(
        self,
        task_id: str,
        session_id: str,
        *,
        kind: str,
        content: str,
        metadata: dict[str, JsonValue],
        turn_id: str | None = None,
    ) -> TranscriptMessage:
        """A new message, created now, published as an upsert."""
        ...

    async def update_message(
        self, message_id: str, content: str, metadata: dict[str, JsonValue]
    ) -> TranscriptMessage:
        """The message with `content` and `metadata` replaced, its id, task, session,
        kind, creation time and turn unchanged, published as an upsert.
        MessageNotFoundError when it does not exist."""
        ...

    async def delete_message(self, message_id: str) -> None:
        """Delete the message and publish the deletion; a message that does not exist
        is already deleted (nothing published)."""
        ...


def new_message_id(now: datetime) -> str:
    """32 lowercase hex, ULID-like: 12 of milliseconds since the epoch, then 20 random: an
    id made in a later millisecond sorts later, and two made together never collide."""
    milliseconds = int(now.timestamp() * 1000) & 0xFFFF_FFFF_FFFF
    return f"{milliseconds:012x}{os.urandom(10).hex()}"
