"""`ProbeWaker`: a circuit owner's alarm clock. At each open circuit's probe time (its
open-until passed, or its probe lease expired with no verdict) it wakes ONE route parked
on the circuit, whose pending attempt then asks for the probe lease (ProbeParked); the
other parked routes keep sleeping until the probe's verdict releases them.

Without it every parked route's timer fires at the probe time: one takes the lease and
all the others are written back to sleep behind it, a burst of route writes that the
release after the probe's success then queues behind (bench/stampede.py). With it, the
parked routes' own deadlines are the safety net, CircuitBinding.owner_wake_margin_s past
the probe time, for an owner that never woke anyone.

The waker reads Redis for every decision (the circuit and its parked set), so it holds
nothing a restart loses: a restarted owner watches its open circuits again. It is told
when a circuit may have changed (`watch`), and while a circuit is not closed it looks
again at least every `poll_s` (a dispatch job may change a circuit without its owner).
A woken route that does not take the lease (it moved on, its host was unreachable) is
followed by the next parked route, each route tried once per probe time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Final

from actors.clock import Clock
from actors.errors import RecoveryError, error_text
from actors.store.circuit_store import CircuitStore
from circuits import CircuitStatus, ResourceKey, machine

POLL_S: Final = 5.0
RETRY_S: Final = 1.0
# Routes woken one after another in one check before the waker looks again.
WAKES_PER_CHECK: Final = 4

Wake = Callable[[ResourceKey, str], Awaitable[bool]]
"""Wake route `route_id` parked on the circuit; True when it took the probe lease."""

log = logging.getLogger(__name__)


class _Watched:
    """One circuit the waker looks after."""

    __slots__ = ("again", "handle", "probe_time", "resource", "running", "tried")

    def __init__(self, resource: ResourceKey) -> None:
        self.resource = resource
        self.handle: asyncio.TimerHandle | None = None
        self.running = False
        self.again = False
        self.probe_time: datetime | None = None
        self.tried: set[str] = set()


class ProbeWaker:
    def __init__(
        self,
        store: CircuitStore,
        clock: Clock,
        wake: Wake,
        *,
        poll_s: float = POLL_S,
        retry_s: float = RETRY_S,
    ) -> None:
        """Wakes routes through `wake`, reading circuits from `store` at `clock`'s time;
        looks at least every `poll_s`, and `retry_s` after Redis failed it."""
        self._store = store
        self._clock = clock
        self._wake = wake
        self._poll_s = poll_s
        self._retry_s = retry_s
        self._watched: dict[str, _Watched] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.woken = 0  # routes woken (tests and the metrics read it)
        self.looks = 0  # circuits read (tests wait on it)

    def __len__(self) -> int:
        """The circuits being watched (not closed, as last read)."""
        return len(self._watched)

    def watch(self, resource: ResourceKey, *, if_new: bool = False) -> None:
        """Look at `resource` now: it may have opened, reopened or closed. `if_new`: only
        when it is not watched yet (a route parked on it: nothing about it changed)."""
        found = self._watched.get(resource.resource_id)
        if found is not None and if_new:
            return
        if found is None:
            found = self._watched[resource.resource_id] = _Watched(resource)
        self._run(found)

    def close(self) -> None:
        for watched in self._watched.values():
            if watched.handle is not None:
                watched.handle.cancel()
        for task in list(self._tasks):
            task.cancel()
        self._watched.clear()

    def _run(self, watched: _Watched) -> None:
        if watched.running:
            watched.again = True  # the running check looks once more when it ends
            return
        if watched.handle is not None:
            watched.handle.cancel()
            watched.handle = None
        watched.running = True
        task = asyncio.get_running_loop().create_task(self._check(watched))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _check(self, watched: _Watched) -> None:
        try:
            while True:
                watched.again = False
                delay = await self._look(watched)
                if not watched.again:
                    break
        except Exception as error:  # never lose the circuit: look again soon
            log.warning("probe wake of %s failed: %s", watched.resource.label, error_text(error))
            delay = self._retry_s
        finally:
            watched.running = False
        if delay is None:
            self._watched.pop(watched.resource.resource_id, None)
            return
        loop = asyncio.get_running_loop()
        watched.handle = loop.call_later(max(0.0, delay), self._run, watched)

    async def _look(self, watched: _Watched) -> float | None:
        """One look at the circuit: wake a parked route if its probe is due; the seconds
        until the next look (None: closed, no longer watched)."""
        self.looks += 1
        try:
            view = await self._store.view(watched.resource)
        except RecoveryError as error:
            log.warning("circuit %s not read: %s", watched.resource.label, error_text(error))
            return self._retry_s
        state, now = view.state, self._clock.now()
        if state.status is CircuitStatus.CLOSED:
            return None
        if machine.probe_due(state, now):
            await self._wake_one(watched, machine.next_change_at(state))
            return min(self._poll_s, self._retry_s * 2)  # soon: did the woken take it?
        due = machine.next_change_at(state)
        until_due = self._poll_s if due is None else (due - now).total_seconds()
        return min(self._poll_s, until_due)

    async def _wake_one(self, watched: _Watched, probe_time: datetime | None) -> None:
        """Wake parked routes, first parked first, each once per probe time, until one
        takes the lease (or WAKES_PER_CHECK tried)."""
        if watched.probe_time != probe_time:
            watched.probe_time, watched.tried = probe_time, set()
        parked = await self._store.parked(watched.resource)
        untried = [route_id for route_id in parked if route_id not in watched.tried]
        if not untried and parked:  # every one was tried: go round again
            watched.tried.clear()
            untried = parked
        for route_id in untried[:WAKES_PER_CHECK]:
            watched.tried.add(route_id)
            self.woken += 1
            if await self._wake(watched.resource, route_id):
                return
