"""`PacedRelease`: a circuit owner's release of a closed circuit's parked routes, one wave
at a time, at the pace the runtime absorbs (circuits.pacing), within the budget.

Planning every wave at the close (circuits.release.plan_release) gives a machine that
carries fewer dispatches a second than the budget a queue: each second's slots fire later
than the last (bench/stampede.py measured the budget's 181 slots a second against ~100
dispatches a second carried). Here a wave is planned only once the previous one was
absorbed: each of its routes fired and handed to the dispatcher (the attempt's dispatch
ledger exists). The pace of the next wave follows what that took (circuits.pacing), and
its first slot is at least the last delivery's time from now, so it is armed before it.

Redis stays the truth: the routes not yet released stay in the circuit's parked set, so
a restarted owner (which releases again every closed circuit still holding parked
routes) goes on where the lost one stopped; a route given its slot already is fenced. A
release stops when the circuit is no longer closed (a released route's failure reopened
it): the routes still parked wait for its next probe. One release runs per circuit; it
reads the circuit and its parked set before every wave, and a circuit closed again by
another probe since (a new lease epoch) starts its release over with its parked routes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from actors.clock import Clock
from actors.errors import RecoveryError, error_text
from actors.keys import AttemptFence
from actors.store.cancels import raise_if_cancelled
from actors.store.circuit_store import CircuitStore
from circuits import (
    CircuitStatus,
    ReleasePace,
    ReleasePlan,
    ReleaseSlot,
    ResourceKey,
    absorbed_enough,
    first_pace,
    next_pace,
    next_start,
    plan_wave,
)

POLL_S: Final = 0.02  # how often a wave's ledgers are counted from its first slot on
# A wave whose absorbed count has not grown for this long past its last slot is done: its
# missing routes moved on (cancelled, stopped) or their host lost them (its reconcile and
# backstops take them); the release goes on without them.
STALL_S: Final = 2.0
FIRST_LEAD_S: Final = 0.1  # the first wave's first slot, after the close
LEAD_FACTOR: Final = 1.5  # a wave's lead: its delivery took this much of the last one's
MIN_LEAD_S: Final = 0.02
MAX_LEAD_S: Final = 2.0
RETRY_S: Final = 1.0  # Redis away: the release looks again after this

Deliver = Callable[[ResourceKey, ReleasePlan], Awaitable[Sequence[AttemptFence]]]
"""Give a wave's routes their slots through their hosts; the attempts of those moved."""

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a wave was absorbed: `absorbed` routes at `observed_at`; `earlier` =
    (absorbed, when) at the first look that found any (None: none yet)."""

    absorbed: int
    observed_at: datetime
    earlier: tuple[int, datetime] | None


class PacedRelease:
    def __init__(
        self,
        store: CircuitStore,
        clock: Clock,
        deliver: Deliver,
        *,
        poll_s: float = POLL_S,
        stall_s: float = STALL_S,
    ) -> None:
        self._store = store
        self._clock = clock
        self._deliver = deliver
        self._poll_s = poll_s
        self._stall_s = stall_s
        self._running: dict[str, asyncio.Task[None]] = {}
        self.waves = 0  # waves delivered (tests and introspection)
        self.delivered = asyncio.Condition()  # notified after each wave's delivery

    def __len__(self) -> int:
        """Releases running."""
        return len(self._running)

    def start(self, resource: ResourceKey) -> None:
        """Release the routes parked on `resource`'s circuit (closed) unless a release of
        it runs already (it reads the parked set before each wave)."""
        if resource.resource_id in self._running:
            return
        task = asyncio.get_running_loop().create_task(self._run(resource))
        self._running[resource.resource_id] = task
        task.add_done_callback(lambda _: self._running.pop(resource.resource_id, None))

    def close(self) -> None:
        for task in list(self._running.values()):
            task.cancel()

    async def _run(self, resource: ResourceKey) -> None:
        released: set[str] = set()  # given a slot by this release (their unpark may lag)
        while True:
            try:
                await self._release(resource, released)
                return
            except RecoveryError as error:
                log.warning("release of circuit %s paused: %s", resource.label, error_text(error))
                await asyncio.sleep(RETRY_S)

    async def _release(self, resource: ResourceKey, released: set[str]) -> None:
        pace: ReleasePace | None = None
        wave: tuple[ReleaseSlot, ...] = ()
        lead = timedelta(seconds=FIRST_LEAD_S)
        settings = self._store.release
        epoch: int | None = None
        while True:
            view = await self._store.view(resource)
            raise_if_cancelled()  # a host closing cancels its releases
            if view.status is not CircuitStatus.CLOSED:
                return
            if view.state.lease_epoch != epoch:  # closed again by another probe since
                epoch, pace, wave = view.state.lease_epoch, None, ()
                released.clear()
            parked = [r for r in await self._store.parked(resource) if r not in released]
            if not parked:
                return
            if pace is None:
                pace = first_pace(
                    len(parked), wave_fraction=settings.wave_fraction,
                    wave_interval=settings.wave_interval, headroom=settings.headroom,
                )  # fmt: skip
            start = next_start(pace, wave, self._clock.now(), lead)
            wave = plan_wave(
                parked, start, pace, seed=self._store.release_seed(view),
                jitter_fraction=settings.jitter_fraction,
            )  # fmt: skip
            sent = self._clock.now()
            fences = await self._deliver(resource, ReleasePlan(pace.budget, (wave,)))
            took = (self._clock.now() - sent).total_seconds()
            lead = timedelta(seconds=min(MAX_LEAD_S, max(MIN_LEAD_S, took * LEAD_FACTOR)))
            released.update(slot.route_id for slot in wave)
            self.waves += 1
            async with self.delivered:
                self.delivered.notify_all()
            seen = await self._absorbed(fences, wave, pace, lead)
            pace = next_pace(
                pace, wave, absorbed=seen.absorbed, observed_at=seen.observed_at,
                earlier=seen.earlier,
            )  # fmt: skip
            log.info(
                "release of %s: wave %d of %d routes (%d moved) from %+.0f ms, delivered in "
                "%.0f ms, %d absorbed %+.0f ms after its last slot; next slot %.1f ms",
                resource.label, self.waves, len(wave), len(fences),
                (wave[0].release_at - sent).total_seconds() * 1000, took * 1000,
                seen.absorbed, (seen.observed_at - wave[-1].release_at).total_seconds() * 1000,
                pace.slot_s * 1000,
            )  # fmt: skip

    async def _absorbed(
        self,
        fences: Sequence[AttemptFence],
        wave: Sequence[ReleaseSlot],
        pace: ReleasePace,
        lead: timedelta,
    ) -> Progress:
        """Count the ledgers of `fences` from the wave's first slot on, until enough are
        there to plan the next wave (circuits.pacing.absorbed_enough) or the count has
        not grown for the stall time past the wave's last slot."""
        last = wave[-1].release_at
        wait = (wave[0].release_at - self._clock.now()).total_seconds()
        if wait > 0:
            await asyncio.sleep(wait)
        count, earlier, progress_at = 0, None, self._clock.now()
        while True:
            found = await self._count(fences)
            now = self._clock.now()
            if found > count:
                count, progress_at = found, now
                earlier = earlier or (found, now)
            if absorbed_enough(pace, len(fences), count, lead):
                return Progress(count, now, earlier)
            if (now - max(last, progress_at)).total_seconds() >= self._stall_s:
                log.warning(
                    "%d of %d released routes not handed to the dispatcher after %.1f s",
                    len(fences) - count, len(fences), self._stall_s,
                )  # fmt: skip
                return Progress(count, progress_at, earlier)
            await asyncio.sleep(self._poll_s)

    async def _count(self, fences: Sequence[AttemptFence]) -> int:
        """How many of `fences` have their dispatch ledger."""
        return await self._store.dispatched(fences)
