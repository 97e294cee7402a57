"""Delayed callbacks behind a seam: the event loop's in a host, a manual one in tests.

The session guards arm their late-event fences through a `Scheduler`, so a test moves a
`ManualClock` and runs what came due without ever sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from actors.clock import ManualClock

__all__ = ["Cancellable", "LoopScheduler", "ManualScheduler", "Scheduler"]


class Cancellable(Protocol):
    def cancel(self) -> None:
        """Never run the callback (no effect once it ran)."""
        ...


class Scheduler(Protocol):
    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Cancellable:
        """Run `callback()` about `delay_s` seconds from now; the caller re-checks its clock
        when it runs (a loop timer may fire early)."""
        ...


class LoopScheduler:
    """The running event loop's `call_later` (a bare TimerHandle, ~0.4 KiB)."""

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Cancellable:
        return asyncio.get_running_loop().call_later(max(0.0, delay_s), callback)


class _Handle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """Callbacks due on a ManualClock, run only by `advance` or `run_due`, in due order
    (then in the order they were scheduled)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._queue: list[tuple[datetime, int, _Handle, Callable[[], None]]] = []
        self._order = itertools.count()

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Cancellable:
        handle = _Handle()
        due = self.clock.now() + timedelta(seconds=max(0.0, delay_s))
        heapq.heappush(self._queue, (due, next(self._order), handle, callback))
        return handle

    @property
    def pending(self) -> int:
        """Callbacks scheduled and neither run nor cancelled."""
        return sum(1 for _, _, handle, _ in self._queue if not handle.cancelled)

    def run_due(self) -> int:
        """Run every callback due by now (and those they schedule for by now); how many ran."""
        ran = 0
        while self._queue and self._queue[0][0] <= self.clock.now():
            _, _, handle, callback = heapq.heappop(self._queue)
            if not handle.cancelled:
                handle.cancelled = True  # ran: a later cancel has nothing to stop
                callback()
                ran += 1
        return ran

    def advance(self, by: timedelta) -> int:
        """Move the clock forward by `by`, stopping at each due time on the way to run
        what came due there (so a callback sees the clock at its own time)."""
        target = self.clock.now() + by
        ran = 0
        while self._queue and self._queue[0][0] <= target:
            self.clock.set(max(self.clock.now(), self._queue[0][0]))
            ran += self.run_due()
        self.clock.set(target)
        return ran + self.run_due()
