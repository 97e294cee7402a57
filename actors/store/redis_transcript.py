"""The default transcript port: session transcripts in Redis, every change on a stream.

Layout (actors/keys.py): one hash per message (`<p>:message:<id>`: id, task_id, session_id,
created_at ISO UTC, kind, content, metadata as JSON text, turn_id with "" for none), a
sorted set per task session (`<p>:session-messages:<task>:<session>`, scored by creation
time, so equal times order by id), the set of sessions with messages, and the stream
`<p>:transcript` (MAXLEN ~). Each mutation is one Lua script that changes the message and
appends its event together, so a viewer following the stream never misses a change nor
sees one that did not happen.

Any Redis failure raises StoreUnavailableError; whether a timed-out mutation ran is
unknown, which the notice writer tolerates (its next write repairs duplicates).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC
from typing import Annotated, Any, Final

from pydantic import JsonValue, StringConstraints, TypeAdapter
from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.clock import Clock
from actors.errors import MessageNotFoundError, StoreUnavailableError
from actors.keys import KeySpace, session_member, valid_message_id
from actors.store.pool import OwnsItsClient
from actors.store.replies import reply_text, reply_texts
from actors.store.scripts import LoadedScript, run_script
from actors.store.transcript import (
    MAX_CONTENT_CHARS,
    TranscriptEvent,
    TranscriptMessage,
    new_message_id,
)

log = logging.getLogger(__name__)

DEFAULT_TRANSCRIPT_MAXLEN: Final = 100_000
_ID_ATTEMPTS: Final = 3  # a random 80-bit collision is never expected; a loop keeps it honest
_CONTENT: Final = TypeAdapter(Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)])
_METADATA: Final = TypeAdapter(dict[str, JsonValue])


def _unavailable(operation: str, error: BaseException) -> StoreUnavailableError:
    detail = str(error) or type(error).__name__
    return StoreUnavailableError(f"transcript {operation}", f"{type(error).__name__}: {detail}")


def message_fields(message: TranscriptMessage) -> list[str]:
    """The message as its hash holds it, flat (name, value, ...)."""
    return [
        "id", message.id,
        "task_id", message.task_id,
        "session_id", message.session_id,
        "created_at", message.created_at.isoformat(),
        "kind", message.kind,
        "content", message.content,
        "metadata", json.dumps(message.metadata, separators=(",", ":"), ensure_ascii=False),
        "turn_id", message.turn_id or "",
    ]  # fmt: skip


def decode_message(fields: dict[str, str]) -> TranscriptMessage:
    """A message hash (or the message fields of an upsert event) as a message; raises
    ValueError (a ValidationError, or bad JSON) when it does not decode."""
    return TranscriptMessage(
        id=fields.get("id", ""),
        task_id=fields.get("task_id", ""),
        session_id=fields.get("session_id", ""),
        created_at=fields.get("created_at", ""),
        kind=fields.get("kind", ""),
        content=fields.get("content", ""),
        metadata=json.loads(fields.get("metadata", "")),
        turn_id=fields.get("turn_id") or None,
    )


def _pairs(flat: Sequence[Any]) -> dict[str, str]:
    texts = [reply_text(value) for value in flat]
    return dict(zip(texts[::2], texts[1::2], strict=True))


class RedisTranscript(OwnsItsClient):
    """Session transcripts in one Redis under one key prefix (implements TranscriptPort).

    The client should come from a bounded pool (actors/store/pool.py); `maxlen` bounds the
    transcript stream (approximately, as MAXLEN ~ does)."""

    def __init__(
        self,
        client: Redis,
        *,
        clock: Clock,
        keys: KeySpace | None = None,
        maxlen: int = DEFAULT_TRANSCRIPT_MAXLEN,
        owns_client: bool = False,
    ) -> None:
        if isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 1:
            raise ValueError(f"maxlen must be an integer >= 1, got {maxlen!r}")
        self.keys = keys or KeySpace()
        self.maxlen = maxlen
        self._client = client
        self._clock = clock
        self._owns_client = owns_client
        self._create = LoadedScript.named("transcript_create")
        self._update = LoadedScript.named("transcript_update")
        self._delete = LoadedScript.named("transcript_delete")

    def _own_client(self) -> Redis:
        return self._client

    async def list_session_messages(self, task_id: str, session_id: str) -> list[TranscriptMessage]:
        """Every message of the task's session, oldest first (then by id). A message
        hash that does not decode is left out with a warning (never fails the list)."""
        index = self.keys.session_messages(task_id, session_id)
        try:
            members = await self._client.zrange(index, 0, -1)
            ids = [reply_text(m) for m in members]
            async with self._client.pipeline(transaction=False) as pipe:
                for message_id in ids:
                    pipe.hgetall(self.keys.message(message_id))
                hashes: list[Any] = await pipe.execute() if ids else []
        except RedisError as error:
            raise _unavailable("list", error) from error
        found: list[TranscriptMessage] = []
        for message_id, raw in zip(ids, hashes, strict=True):
            if not raw:
                continue  # deleted between the two reads
            try:
                found.append(decode_message(reply_texts(raw)))
            except ValueError as error:
                log.warning("unreadable transcript message %s: %s", message_id, error)
        return found

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
        """A new message, created now under a fresh id, published as an upsert."""
        now = self._clock.now().astimezone(UTC)
        for _ in range(_ID_ATTEMPTS):
            message = TranscriptMessage(
                id=new_message_id(now), task_id=task_id, session_id=session_id,
                created_at=now, kind=kind, content=content, metadata=metadata,
                turn_id=turn_id,
            )  # fmt: skip
            keys = [
                self.keys.message(message.id),
                self.keys.session_messages(task_id, session_id),
                self.keys.transcript_sessions,
                self.keys.transcript,
            ]
            argv = [
                message.id, repr(now.timestamp()), session_member(task_id, session_id),
                self.maxlen, *message_fields(message),
            ]  # fmt: skip
            try:
                created = await run_script(self._client, self._create, keys, argv)
            except RedisError as error:
                raise _unavailable("create", error) from error
            if int(created) == 1:
                return message
        raise StoreUnavailableError("transcript create", "no free message id")

    async def update_message(
        self, message_id: str, content: str, metadata: dict[str, JsonValue]
    ) -> TranscriptMessage:
        """The message with its content and metadata replaced (id, task, session, kind,
        created_at and turn unchanged), published as an upsert; MessageNotFoundError
        when there is no such message."""
        key = self.keys.message(message_id)
        # Validated as a message's fields are, before anything is sent.
        content = _CONTENT.validate_python(content)
        encoded = json.dumps(
            _METADATA.validate_python(metadata), separators=(",", ":"), ensure_ascii=False
        )
        try:
            reply = await run_script(
                self._client, self._update, [key, self.keys.transcript],
                [content, encoded, self.maxlen],
            )  # fmt: skip
        except RedisError as error:
            raise _unavailable("update", error) from error
        if not reply:
            raise MessageNotFoundError(message_id)
        try:
            return decode_message(_pairs(reply))
        except ValueError as error:
            detail = f"unreadable message: {error}"
            raise StoreUnavailableError("transcript update", detail) from error

    async def delete_message(self, message_id: str) -> None:
        """Delete the message and publish `session.message.deleted`; a message that does
        not exist is already deleted (nothing published)."""
        key = self.keys.message(valid_message_id(message_id))
        try:
            task_id, session_id = await self._client.hmget(key, ["task_id", "session_id"])
            if task_id is None or session_id is None:
                return
            task_id, session_id = reply_text(task_id), reply_text(session_id)
            keys = [
                key,
                self.keys.session_messages(task_id, session_id),
                self.keys.transcript_sessions,
                self.keys.transcript,
            ]
            argv = [message_id, task_id, session_id, session_member(task_id, session_id),
                    self.maxlen]  # fmt: skip
            await run_script(self._client, self._delete, keys, argv)
        except RedisError as error:
            raise _unavailable("delete", error) from error

    async def sessions(self) -> list[tuple[str, str]]:
        """Every (task, session) that has messages, sorted (for `recovery notices`)."""
        try:
            members = await self._client.smembers(self.keys.transcript_sessions)
        except RedisError as error:
            raise _unavailable("sessions", error) from error
        pairs = (reply_text(member).partition(":") for member in members)
        return sorted((task, session) for task, _, session in pairs)

    async def events(self, after: str | None = None, count: int = 100) -> list[TranscriptEvent]:
        """Up to `count` changes, oldest first, after the stream id `after`."""
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        start = "-" if after is None else f"({after}"
        try:
            entries = await self._client.xrange(self.keys.transcript, start, "+", count=count)
        except RedisError as error:
            raise _unavailable("events", error) from error
        return [decode_event(reply_text(event_id), reply_texts(fields))
                for event_id, fields in entries or []]  # fmt: skip


def decode_event(event_id: str, fields: dict[str, str]) -> TranscriptEvent:
    """One stream entry as an event (an upsert's fields are the whole message)."""
    kind = fields.get("event", "")
    message = decode_message(fields) if kind == "session.message.updated" else None
    return TranscriptEvent.model_validate(
        {"event_id": event_id, "event": kind, "message_id": fields.get("id", ""),
         "task_id": fields.get("task_id", ""), "session_id": fields.get("session_id", ""),
         "message": message}
    )  # fmt: skip
