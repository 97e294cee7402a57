"""A route host's follower of its wake stream (actors/store/wakes.py).

From the last entry the host saw before it rehydrated (so nothing written meanwhile is
missed), it takes the entries jobs wrote for the host's routes: a wait arms the route's
precise timer (`arm`), a delivered dispatch goes to the host's notices (`delivered`: the
session's accepted prompt, actors/engine/notice_lifecycle.py), in a task of its own: its
session guard may be held by a slow transcript call, which must not hold up the waits
read after it. A dispatcher call's outcome and latency go to `dispatched` (the host's
metrics). With Redis away it logs, waits a second and reads on from where it was
(the durable backstops still cover the waits). `followed(entry_id)` waits until every
entry up to that id has been taken and handed on, so what the host did with it can be
read once it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final

from redis.asyncio import Redis

from actors.errors import RecoveryError, error_text
from actors.keys import AttemptFence, KeySpace
from actors.store.wakes import Delivered, Dispatched, next_wakes

__all__ = ["WakeFollower"]

WAKE_BLOCK_MS: Final = 1000
RETRY_S: Final = 1.0

log = logging.getLogger(__name__)


def _order(entry_id: str) -> tuple[int, int]:
    """A stream entry id ("<ms>-<seq>") as the pair Redis orders entries by."""
    millis, _, sequence = entry_id.partition("-")
    try:
        return int(millis), int(sequence or 0)
    except ValueError:
        raise ValueError(f"a stream entry id is '<ms>-<seq>', got {entry_id!r}") from None


class WakeFollower:
    """Follows one host's wake stream on `client` (the caller's to close)."""

    def __init__(
        self,
        client: Redis,
        keys: KeySpace,
        host_id: str,
        *,
        arm: Callable[[AttemptFence, datetime], None],
        delivered: Callable[[Sequence[AttemptFence]], Awaitable[None]],
        dispatched: Callable[[Dispatched], None] | None = None,
    ) -> None:
        self._client = client
        self._keys = keys
        self._host_id = host_id
        self._arm = arm
        self._delivered = delivered
        self._dispatched = dispatched
        self._taken = (0, 0)
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._handing: set[asyncio.Task[None]] = set()  # deliveries being handed on

    def start(self, after: str) -> None:
        """Follow the entries after id `after`, on the running loop."""
        self._taken = _order(after)
        self._task = asyncio.get_running_loop().create_task(self._follow(after))

    @property
    def following(self) -> bool:
        """Whether it follows the stream now (started and not closed)."""
        return self._task is not None and not self._task.done()

    async def followed(self, entry_id: str) -> None:
        """Wait until every entry up to `entry_id` has been taken (or was older than where
        the follower started) and every delivery taken so far has been handed on."""
        wanted = _order(entry_id)
        async with self._changed:
            await self._changed.wait_for(lambda: self._taken >= wanted)
        await asyncio.gather(*self._handing)

    async def aclose(self) -> None:
        for task in [*self._handing, *([self._task] if self._task is not None else [])]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(self, after: str) -> None:
        while True:
            try:
                after, wakes = await next_wakes(
                    self._client, self._keys, self._host_id, after, block_ms=WAKE_BLOCK_MS
                )
            except RecoveryError as error:  # Redis away: the backstop still covers them
                log.warning(
                    "route host %s cannot follow its wakes: %s", self._host_id, error_text(error)
                )
                await asyncio.sleep(RETRY_S)
                continue
            delivered: list[AttemptFence] = []
            for wake in wakes:
                if isinstance(wake, Delivered):
                    delivered.append(wake.fence)
                elif isinstance(wake, Dispatched):
                    if self._dispatched is not None:
                        self._dispatched(wake)
                else:
                    self._arm(wake.fence, wake.deadline)
            if delivered:  # RouteNotices.delivered never raises
                handing = asyncio.get_running_loop().create_task(self._hand_on(delivered))
                self._handing.add(handing)
                handing.add_done_callback(self._handing.discard)
            async with self._changed:
                self._taken = max(self._taken, _order(after))
                self._changed.notify_all()

    async def _hand_on(self, delivered: Sequence[AttemptFence]) -> None:
        await self._delivered(delivered)
