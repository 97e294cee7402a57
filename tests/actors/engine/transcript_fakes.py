"""Transcript ports for the notice tests: an in-memory one, and a wrapper around any port
that injects failures and holds calls at gates (asyncio events, never sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import JsonValue

from actors.clock import Clock
from actors.errors import MessageNotFoundError
from actors.store.transcript import TranscriptMessage, TranscriptPort, new_message_id

OPERATIONS = ("list", "create", "update", "delete")


class PortFailureError(RuntimeError):
    """What a faulty port raises (any exception: the writer must swallow them all)."""


class MemoryTranscript:
    """A TranscriptPort in a dict, oldest first by (created_at, id), with its events."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.messages: dict[str, TranscriptMessage] = {}
        self.events: list[tuple[str, str]] = []  # (event, message id)

    async def list_session_messages(self, task_id: str, session_id: str) -> list[TranscriptMessage]:
        found = [m for m in self.messages.values()
                 if (m.task_id, m.session_id) == (task_id, session_id)]  # fmt: skip
        return sorted(found, key=lambda m: (m.created_at, m.id))

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
        now = self.clock.now()
        message = TranscriptMessage(
            id=new_message_id(now), task_id=task_id, session_id=session_id, created_at=now,
            kind=kind, content=content, metadata=metadata, turn_id=turn_id,
        )  # fmt: skip
        self.messages[message.id] = message
        self.events.append(("session.message.updated", message.id))
        return message

    async def update_message(
        self, message_id: str, content: str, metadata: dict[str, JsonValue]
    ) -> TranscriptMessage:
        if message_id not in self.messages:
            raise MessageNotFoundError(message_id)
        updated = self.messages[message_id].model_copy(
            update={"content": content, "metadata": metadata}
        )
        self.messages[message_id] = updated
        self.events.append(("session.message.updated", message_id))
        return updated

    async def delete_message(self, message_id: str) -> None:
        if self.messages.pop(message_id, None) is not None:
            self.events.append(("session.message.deleted", message_id))

    def seed(
        self,
        task_id: str = "task-1",
        session_id: str = "route-1",
        *,
        metadata: dict[str, JsonValue] | None = None,
        kind: str = "status",
        age: timedelta = timedelta(0),
        message_id: str | None = None,
        turn_id: str | None = None,
    ) -> TranscriptMessage:
        """Put a message in directly (a legacy duplicate, another kind), `age` old."""
        at = self.clock.now() - age
        message = TranscriptMessage(
            id=message_id or new_message_id(at), task_id=task_id, session_id=session_id,
            created_at=at, kind=kind, content="seeded",
            metadata={"retrying": True} if metadata is None else metadata, turn_id=turn_id,
        )  # fmt: skip
        self.messages[message.id] = message
        return message

    def retrying(self, task_id: str = "task-1", session_id: str = "route-1") -> list[str]:
        """Ids of the pair's messages with the boolean retrying: true."""
        return sorted(m.id for m in self.messages.values()
                      if (m.task_id, m.session_id) == (task_id, session_id)
                      and m.metadata.get("retrying") is True)  # fmt: skip


@dataclass
class Gate:
    """Holds one operation: `entered` is set when a call arrives, the call goes on once
    `release` is set."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


class FaultyTranscript:
    """Any port, with failures switched on per operation (or per message id for delete),
    gates that hold calls, and a log of the calls made."""

    def __init__(self, inner: TranscriptPort, *, yields: Callable[[], int] | None = None) -> None:
        """`yields()`: how many turns of the loop each call gives away before it runs
        (other sessions' calls interleave there); None gives none."""
        self.inner = inner
        self.failing: set[str] = set()
        self.failing_ids: set[str] = set()
        self.gates: dict[str, Gate] = {}
        self.calls: list[str] = []
        self.yields = yields
        self.before_write: Callable[[str, str, dict[str, JsonValue]], None] | None = None

    def gate(self, operation: str) -> Gate:
        self.gates[operation] = Gate()
        return self.gates[operation]

    async def _enter(self, operation: str, message_id: str | None = None) -> None:
        self.calls.append(operation)
        for _ in range(self.yields() if self.yields is not None else 0):
            await asyncio.sleep(0)  # a turn of the loop: other calls interleave
        gate = self.gates.pop(operation, None)
        if gate is not None:
            gate.entered.set()
            await gate.release.wait()
        if operation in self.failing or (message_id is not None and message_id in self.failing_ids):
            raise PortFailureError(f"{operation} failed")

    async def list_session_messages(self, task_id: str, session_id: str) -> list[TranscriptMessage]:
        await self._enter("list")
        return await self.inner.list_session_messages(task_id, session_id)

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
        await self._enter("create")
        if self.before_write is not None:
            self.before_write("create", session_id, metadata)
        return await self.inner.create_message(
            task_id, session_id, kind=kind, content=content, metadata=metadata, turn_id=turn_id
        )

    async def update_message(
        self, message_id: str, content: str, metadata: dict[str, JsonValue]
    ) -> TranscriptMessage:
        await self._enter("update", message_id)
        if self.before_write is not None:
            self.before_write("update", message_id, metadata)
        return await self.inner.update_message(message_id, content, metadata)

    async def delete_message(self, message_id: str) -> None:
        await self._enter("delete", message_id)
        await self.inner.delete_message(message_id)


def notice_metadata(ordinal: int, **extra: Any) -> dict[str, JsonValue]:
    return {"retrying": True, "retry_ordinal": ordinal, "actions": ["cancel"], **extra}


def at(clock: Clock, seconds: float) -> datetime:
    return clock.now() + timedelta(seconds=seconds)
