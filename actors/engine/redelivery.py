"""Circuit writes that could not be delivered, sent again until they are.

A route round's circuit side effects follow its durable transitions (actors/engine/
circuit_effects.py). When the circuits' owner cannot take them (Redis away, a circuit host
restarting), what was not written comes back as an undelivered CircuitRound; it is queued
here and sent again in the background with capped exponential delays, never only logged.
Sending again is safe (actors/engine/circuit_round.py: each part is idempotent).

Bounds: at most `max_pending` rounds wait (a new one beyond that pushes the oldest out,
logged), and a round older than `max_age_s` is given up (logged): by then its failures are
outside any circuit window and its probe lease has expired by its TTL, so the next caller
probes; a parked route re-checks its circuit at its own deadline either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from actors.engine.circuit_round import CircuitPort, CircuitRound, Release
from actors.store.cancels import raise_if_cancelled

FIRST_DELAY_S: Final = 0.05
MAX_DELAY_S: Final = 5.0
MAX_AGE_S: Final = 600.0
MAX_PENDING: Final = 10_000

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Pending:
    round: CircuitRound
    since: float  # time.monotonic() of its first failed delivery


class Redelivery:
    """The background resender of one process's undelivered circuit rounds. `on_releases`
    carries out the releases a redelivered probe success planned (local circuits only)."""

    def __init__(
        self,
        port: CircuitPort,
        *,
        on_releases: Callable[[Sequence[Release]], Awaitable[Any]] | None = None,
        max_pending: int = MAX_PENDING,
        max_age_s: float = MAX_AGE_S,
    ) -> None:
        self.port = port
        self.on_releases = on_releases
        self.max_pending = max_pending
        self.max_age_s = max_age_s
        self.delivered = 0  # rounds sent again successfully (tests wait on it)
        self.given_up = 0
        self._pending: deque[_Pending] = deque()
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, round_: CircuitRound, since: float | None = None) -> None:
        """Queue `round_` and make sure the resender runs."""
        if len(self._pending) >= self.max_pending:
            dropped = self._pending.popleft()
            self.given_up += 1
            log.error(
                "circuit redelivery full (%d rounds): gave up a round of %s",
                self.max_pending, sorted(dropped.round.resources()),
            )  # fmt: skip
        self._pending.append(_Pending(round_, time.monotonic() if since is None else since))
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait_idle(self) -> None:
        """Wait until nothing is left to send again."""
        await self._idle.wait()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        delay = FIRST_DELAY_S
        while self._pending:
            await asyncio.sleep(delay)
            progressed = await self._send_all()
            raise_if_cancelled()  # aclose waits for this loop: a swallowed cancel must end it
            delay = FIRST_DELAY_S if progressed else min(MAX_DELAY_S, delay * 2)
        self._idle.set()

    async def _send_all(self) -> bool:
        """One pass over the queue, oldest first, each round at its own time (a failure
        counts at the moment it was seen); it stops at the first round still not taken,
        so rounds are written in the order they were made. True when something got
        through."""
        progressed = False
        while self._pending:
            pending = self._pending.popleft()
            if time.monotonic() - pending.since > self.max_age_s:
                self.given_up += 1
                log.error(
                    "circuit writes of %s undelivered for %.0f s: given up",
                    sorted(pending.round.resources()), self.max_age_s,
                )  # fmt: skip
                continue
            rest = await self._send(pending.round)
            if rest is not None:
                self._pending.appendleft(_Pending(rest, pending.since))
                return progressed or rest != pending.round
            self.delivered += 1
            progressed = True
        return progressed

    async def _send(self, round_: CircuitRound) -> CircuitRound | None:
        try:
            applied = await self.port.apply_round(round_)
        except Exception as error:  # the owner's own failure: keep it all for later
            log.warning("circuit redelivery failed: %s", type(error).__name__)
            return round_
        if applied.releases and self.on_releases is not None:
            await self.on_releases(applied.releases)
        return applied.undelivered
