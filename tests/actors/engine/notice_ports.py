"""The ports the notice tests run on: in memory, the Redis transcript on fakeredis, and the
Redis transcript on the session's real Redis (integration tier)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import pytest
from pydantic import JsonValue

from actors.clock import ManualClock
from actors.store.redis_transcript import RedisTranscript
from actors.store.transcript import TranscriptMessage, TranscriptPort
from tests.actors.conftest import Backend
from tests.actors.engine.transcript_fakes import MemoryTranscript
from tests.actors.route_builders import T0


@dataclass
class PortKind:
    name: str
    backend: Backend | None

    @property
    def clock(self) -> ManualClock:
        return self.backend.clock if self.backend is not None else self._clock

    def __post_init__(self) -> None:
        self._clock = ManualClock(T0)

    @asynccontextmanager
    async def open(self) -> AsyncIterator[TranscriptPort]:
        if self.backend is None:
            yield MemoryTranscript(self.clock)
            return
        store = RedisTranscript(
            self.backend.raw(), clock=self.clock, keys=self.backend.keys, owns_client=True
        )
        async with store:
            yield store


@pytest.fixture(
    params=["memory", "fakeredis", pytest.param("redis", marks=pytest.mark.integration)]
)
def port_kind(request: pytest.FixtureRequest) -> PortKind:
    if request.param == "memory":
        return PortKind("memory", None)
    name = "real_backend" if request.param == "redis" else "fake_backend"
    backend: Backend = request.getfixturevalue(name)
    return PortKind(request.param, backend)


async def seed(
    port: TranscriptPort,
    clock: ManualClock,
    *,
    task_id: str = "task-1",
    session_id: str = "route-1",
    metadata: dict[str, JsonValue] | None = None,
    kind: str = "status",
    age: timedelta = timedelta(0),
    turn_id: str | None = None,
) -> TranscriptMessage:
    """A message written `age` ago through the port itself (a legacy duplicate, another
    kind, another session's message)."""
    now = clock.now()
    clock.set(now - age)
    try:
        return await port.create_message(
            task_id, session_id, kind=kind, content="seeded",
            metadata={"retrying": True} if metadata is None else metadata, turn_id=turn_id,
        )  # fmt: skip
    finally:
        clock.set(now)


async def retrying_ids(
    port: TranscriptPort, task_id: str = "task-1", session_id: str = "route-1"
) -> list[str]:
    """Ids of the pair's messages whose metadata has the boolean retrying: true."""
    listed = await port.list_session_messages(task_id, session_id)
    return sorted(m.id for m in listed if m.metadata.get("retrying") is True)
