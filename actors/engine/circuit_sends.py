"""Circuit rounds on their way to a remote owner, sent after the answer.

A route round's circuit side effects follow its durable transitions and were never part
of its answer's guarantee: what the owner cannot take is sent again in the background
(actors/engine/redelivery.py). With circuit hosts (Ray actors) the delivery is one Ray
call that costs about as much as the rest of a report (~6 ms of a ~11 ms report here), so
a route host answers first and sends the round in the background. Two rules keep every
decision this process makes as it was when it waited:

- per circuit, this process's rounds land in the order they were made (a round waits
  for the earlier rounds of this process that touch any of its circuits);
- a round that reads circuits first waits for this process's rounds still on their way
  to them (`landed`), so it plans from a board that has every earlier report of this
  process counted, as before.

Other processes' rounds were never ordered with these. At most `max_in_flight` rounds are
on their way: beyond that a sender waits for its own round (a circuit host restarting
holds the calls sent to it). `drain` waits for everything (a host that stops sends what
it holds first); what a crash loses is what the crash window
of a settle always lost (the route transitions are durable; actors/engine/
circuit_effects.py says what each lost effect costs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from actors.engine.circuit_round import CircuitRound

DRAIN_TIMEOUT_S: Final = 10.0
MAX_IN_FLIGHT: Final = 1024
"""Rounds on their way at most before a round's sender waits for its own to land (a
circuit host restarting holds every call sent to it: the rounds wait in memory)."""

log = logging.getLogger(__name__)


class OrderedSends:
    """This process's circuit rounds in flight, by circuit (see the module). `deliver`
    sends one round and queues what it could not write for redelivery; it never raises
    for the owner's refusal (an exception here is logged and its round handed to
    `undelivered`)."""

    def __init__(
        self,
        deliver: Callable[[CircuitRound], Awaitable[object]],
        undelivered: Callable[[CircuitRound], None],
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self.max_in_flight = max_in_flight
        self._deliver = deliver
        self._undelivered = undelivered
        self._latest: dict[str, asyncio.Task[None]] = {}  # resource id -> its last round
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        """Rounds not landed yet."""
        return len(self._tasks)

    @property
    def full(self) -> bool:
        """Whether `max_in_flight` rounds are on their way."""
        return len(self._tasks) >= self.max_in_flight

    async def post(self, round_: CircuitRound) -> None:
        """`send`; when the sends were already `full`, wait until `round_` has landed (its
        order kept): a sender's back-pressure."""
        full = self.full
        self.send(round_)
        if full:
            await self.landed(round_.resources())

    def send(self, round_: CircuitRound) -> None:
        """Send `round_` after this process's earlier rounds on any of its circuits."""
        if not round_:
            return
        resources = round_.resources()
        earlier = {self._latest[r] for r in resources if r in self._latest}
        task = asyncio.get_running_loop().create_task(self._send_after(round_, earlier))
        self._tasks.add(task)
        for resource_id in resources:
            self._latest[resource_id] = task
        task.add_done_callback(lambda done: self._forget(done, resources))

    async def landed(self, resource_ids: Iterable[str]) -> None:
        """Wait until this process's rounds on these circuits have been delivered (or
        queued for redelivery)."""
        waiting = {self._latest[r] for r in resource_ids if r in self._latest}
        if waiting:
            await asyncio.wait(waiting)

    async def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Wait (at most `timeout_s`) for every round in flight."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    async def _send_after(self, round_: CircuitRound, earlier: set[asyncio.Task[None]]) -> None:
        if earlier:
            await asyncio.wait(earlier)
        try:
            await self._deliver(round_)
        except Exception:  # never lost: the redelivery sends it again
            log.exception("circuit round not delivered; sent again later")
            with contextlib.suppress(Exception):
                self._undelivered(round_)

    def _forget(self, task: asyncio.Task[None], resources: set[str]) -> None:
        self._tasks.discard(task)
        for resource_id in resources:
            if self._latest.get(resource_id) is task:
                del self._latest[resource_id]
