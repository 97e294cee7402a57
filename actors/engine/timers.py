"""The precise in-process timers of one route host: at most one per route.

A timer is armed only from a snapshot Redis returned (an applied transition, or a
schedule read back at rehydration), so nothing is armed that is not durable. It is a bare
`loop.call_at` handle (~0.4 KiB); when it fires, the deadline is checked again against the
clock (uvloop may fire early) and an early timer is simply armed again. Firing itself is
the caller's fenced `fire_due`, so a stale or duplicate timer is a no-op there.

Timers that come due in the same turn of the event loop fire together: one call of
`fire_many` (the host runs them as one pipelined batch), so a loop that fell behind under
load catches up in one round trip instead of one per timer.

Snapshots can reach `track` out of order (two calls on one route finishing in either
order); a snapshot older than the armed timer's attempt — a lower (generation, attempt
ordinal) — never replaces or cancels it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from actors.clock import Clock
from actors.errors import RecoveryError, error_report, error_text
from actors.keys import AttemptFence
from actors.routes.models import (
    WAITING_STATES,
    RouteSnapshot,
    ScheduleEntry,
    attempt_retrying,
    holds_attempt,
)

RETRY_AFTER_ERROR_S: Final = 1.0
MIN_REFIRE_S: Final = 0.01

log = logging.getLogger(__name__)

FireDue = Callable[[AttemptFence], Awaitable[RouteSnapshot]]
"""`fire_due(fence)`: the fenced transition a timer performs for one attempt."""

Due = AttemptFence
FireMany = Callable[[Sequence[Due]], Awaitable[Sequence[RouteSnapshot | Exception]]]
"""Several `fire_due`s at once: per item the route after it, or its error."""


@dataclass(frozen=True, slots=True)
class PendingTimer:
    fence: AttemptFence
    deadline: datetime
    handle: asyncio.TimerHandle


class RouteTimers:
    def __init__(
        self,
        fire_due: FireDue | FireMany,
        clock: Clock,
        on_fired: Callable[[float], None] | None = None,
        *,
        batched: bool = False,
    ) -> None:
        """`fire_due` fires one timer, or with `batched` several at once (FireMany).
        `on_fired(lateness_s)` is told how late each timer that fired its attempt was:
        the write time of its transition minus the deadline."""
        self._fire_many: FireMany = (
            fire_due if batched else _one_by_one(fire_due)  # type: ignore[assignment,arg-type]  # `batched` says which
        )
        self._clock = clock
        self._on_fired = on_fired
        self._pending: dict[str, PendingTimer] = {}
        self._firing: set[asyncio.Task[None]] = set()
        self._ready: list[tuple[str, PendingTimer]] = []

    def __len__(self) -> int:
        return len(self._pending)

    def deadline_of(self, route_id: str) -> datetime | None:
        timer = self._pending.get(route_id)
        return None if timer is None else timer.deadline

    def track(self, snapshot: RouteSnapshot) -> None:
        """Arm, re-arm or cancel the route's timer to match an authoritative snapshot."""
        current = self._pending.get(snapshot.route_id)
        attempt = (snapshot.generation, snapshot.attempt_ordinal)
        if current is not None and attempt < _order(current.fence):
            return  # an older answer arriving late: the armed timer is newer
        if snapshot.state in WAITING_STATES and snapshot.deadline is not None:
            self.arm(snapshot.attempt, snapshot.deadline)
        elif current is not None:
            self.cancel(snapshot.route_id)

    def offer(self, fence: AttemptFence, deadline: datetime) -> None:
        """Arm a wait someone else wrote (a job), unless a later attempt of the route is
        armed already: an older wait arriving late never replaces a newer one."""
        current = self._pending.get(fence.route_id)
        if current is not None and _order(fence) < _order(current.fence):
            return
        self.arm(fence, deadline)

    def arm_schedule(self, entry: ScheduleEntry) -> None:
        self.arm(entry.fence, entry.deadline)

    def arm(self, fence: AttemptFence, deadline: datetime, *, min_delay_s: float = 0.0) -> None:
        """(Re-)arm the route's one timer for attempt `fence` at `deadline`."""
        route_id = fence.route_id
        current = self._pending.get(route_id)
        if current is not None:
            if (current.fence, current.deadline) == (fence, deadline):
                return
            current.handle.cancel()
        loop = asyncio.get_running_loop()
        delay = max(min_delay_s, (deadline - self._clock.now()).total_seconds())
        handle = loop.call_at(loop.time() + delay, self._due, route_id)
        self._pending[route_id] = PendingTimer(fence, deadline, handle)

    def cancel(self, route_id: str) -> None:
        timer = self._pending.pop(route_id, None)
        if timer is not None:
            timer.handle.cancel()

    def cancel_all(self) -> None:
        for route_id in list(self._pending):
            self.cancel(route_id)
        for task in list(self._firing):
            task.cancel()

    def _due(self, route_id: str) -> None:
        timer = self._pending.pop(route_id, None)
        if timer is None:
            return
        self._ready.append((route_id, timer))
        if len(self._ready) == 1:  # the first this turn: fire them all once the turn ends
            asyncio.get_running_loop().call_soon(self._fire_ready)

    def _fire_ready(self) -> None:
        ready, self._ready = self._ready, []
        task = asyncio.get_running_loop().create_task(self._fire(ready))
        self._firing.add(task)
        task.add_done_callback(self._firing.discard)

    async def _fire(self, ready: list[tuple[str, PendingTimer]]) -> None:
        now = self._clock.now()
        due: list[tuple[str, PendingTimer]] = []
        for route_id, timer in ready:
            if now < timer.deadline:  # fired early: wait the rest
                self._rearm(route_id, timer)
            else:
                due.append((route_id, timer))
        if not due:
            return
        try:
            results = await self._fire_many([timer.fence for _, timer in due])
        except RecoveryError as error:  # Redis down: the schedules are still durable
            results = [error] * len(due)
        for (route_id, timer), result in zip(due, results, strict=True):
            self._settle(route_id, timer, result)

    def _settle(
        self, route_id: str, timer: PendingTimer, result: RouteSnapshot | Exception
    ) -> None:
        if isinstance(result, Exception):  # the schedule is durable: try again soon
            if isinstance(result, RecoveryError):  # Redis trouble
                log.warning(
                    "timer of route %s could not fire, retrying: %s", route_id, error_text(result)
                )
            else:
                log.error("timer of route %s failed, retrying: %s", route_id, error_report(result))
            self._rearm(route_id, timer, min_delay_s=RETRY_AFTER_ERROR_S)
            return
        snapshot = result
        if snapshot.state in WAITING_STATES and holds_attempt(snapshot, timer.fence):
            if snapshot.deadline is not None and snapshot.deadline != timer.deadline:
                self.track(snapshot)  # parked again on a circuit: the new deadline
                return
            # Not fired (the store's clock says not yet): try again, never in a hot loop.
            self._rearm(route_id, timer, min_delay_s=MIN_REFIRE_S)
            return
        self._observe(snapshot, timer)
        self.track(snapshot)

    def _observe(self, snapshot: RouteSnapshot, timer: PendingTimer) -> None:
        fired = attempt_retrying(snapshot, timer.fence)
        if fired and self._on_fired is not None and snapshot.updated_at is not None:
            self._on_fired((snapshot.updated_at - timer.deadline).total_seconds())

    def _rearm(self, route_id: str, timer: PendingTimer, *, min_delay_s: float = 0.0) -> None:
        if route_id not in self._pending:  # nothing newer was armed meanwhile
            self.arm(timer.fence, timer.deadline, min_delay_s=min_delay_s)


def _one_by_one(fire_due: FireDue) -> FireMany:
    """A FireMany over a single-timer `fire_due` (each timer its own call, concurrently)."""

    async def fire_many(items: Sequence[Due]) -> list[RouteSnapshot | Exception]:
        results = await asyncio.gather(*(fire_due(item) for item in items), return_exceptions=True)
        return [_as_outcome(result) for result in results]

    return fire_many


def _order(fence: AttemptFence) -> tuple[int, int]:
    """Attempts of one route in the order they were scheduled."""
    return (fence.generation, fence.ordinal)


def _as_outcome(result: RouteSnapshot | BaseException) -> RouteSnapshot | Exception:
    if isinstance(result, BaseException) and not isinstance(result, Exception):
        raise result  # cancellation and the like are not a timer's business
    return result
