"""Synchronous reads of the Redis transcript, for the CLI (`recovery notices`): the keys of
one prefix decoded exactly as RedisTranscript reads them (keys.py documents the layout)."""

from __future__ import annotations

from typing import Any

import redis

from actors.errors import InvalidIdentifierError
from actors.keys import KeySpace, valid_route_id, valid_task_id
from actors.store.redis_transcript import decode_message
from actors.store.replies import reply_text, reply_texts
from actors.store.transcript import TranscriptMessage

__all__ = ["read_notices", "read_session_messages"]


def read_session_messages(
    client: redis.Redis, keys: KeySpace, task_id: str, session_id: str
) -> list[TranscriptMessage]:
    """Every message of the task's session, oldest first (one that does not decode is
    left out)."""
    ids = [reply_text(m) for m in client.zrange(keys.session_messages(task_id, session_id), 0, -1)]
    with client.pipeline(transaction=False) as pipe:
        for message_id in ids:
            pipe.hgetall(keys.message(message_id))
        hashes: list[Any] = pipe.execute() if ids else []
    found: list[TranscriptMessage] = []
    for raw in hashes:
        if not raw:
            continue  # deleted between the two reads
        try:
            found.append(decode_message(reply_texts(raw)))
        except ValueError:
            continue  # unreadable: RedisTranscript logs it when the runtime reads it
    return found


def read_notices(
    client: redis.Redis, keys: KeySpace, session_id: str | None = None
) -> list[TranscriptMessage]:
    """The outstanding retry notices (metadata `retrying: true`) of every session, or of
    one session whatever its task, by session then creation time."""
    if session_id is not None:
        valid_route_id(session_id)
    notices: list[TranscriptMessage] = []
    for member in sorted(reply_text(m) for m in client.smembers(keys.transcript_sessions)):
        task_id, _, session = member.partition(":")
        if session_id is not None and session != session_id:
            continue
        try:
            valid_task_id(task_id)
            valid_route_id(session)
        except InvalidIdentifierError:
            continue  # not written by the transcript; never turned into a key
        listed = read_session_messages(client, keys, task_id, session)
        notices.extend(m for m in listed if m.metadata.get("retrying") is True)
    return sorted(notices, key=lambda m: (m.session_id, m.created_at, m.id))
