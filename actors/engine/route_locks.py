"""One asyncio lock per route, for the batch runner (actors/engine/batch.py): a route's
transitions in one process are strictly serial; different routes run concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager

__all__ = ["RouteLocks"]


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class RouteLocks:
    """One lock per route, created on first use and dropped when its last user leaves,
    so idle routes cost nothing here."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @asynccontextmanager
    async def hold(self, route_id: str) -> AsyncIterator[None]:
        entry = self._entries.get(route_id)
        if entry is None:
            entry = self._entries[route_id] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[route_id]

    @asynccontextmanager
    async def hold_all(self, route_ids: Iterable[str]) -> AsyncIterator[None]:
        """The locks of several routes, taken in sorted order (a fixed global order:
        holders of several locks never wait on each other in a cycle)."""
        async with AsyncExitStack() as stack:
            for route_id in sorted(set(route_ids)):
                await stack.enter_async_context(self.hold(route_id))
            yield
