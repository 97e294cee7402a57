"""The phases of bench/dispatch.py: paced failure reports, waiting for the recording
dispatcher's log, and the figures read back from the routes' histories.

The deadline of an attempt is the one its route's `retry` record scheduled (the host's
clock when it wrote that transition); the timer fired at the `at` of the route's
`deadline_reached` record of the same attempt (generation, attempt ordinal): the host's
clock when it wrote the fenced move to `retrying`. The dispatcher was called at the `at`
the recording dispatcher logged (bench/chaos_dispatcher.py: `time.time()` in the worker,
taken before anything else it does).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from bench_common import ms, percentile
from chaos_dispatcher import read_log
from timer_phases import bounded, fail

from actors.demo.dispatcher import DispatchRecord
from actors.hosting.handle import RouteHandle
from actors.routes.models import AttemptRecord
from actors.store.route_store import RouteStore

POLL_S: Final = 0.1
READ_CONCURRENCY: Final = 64

Attempt = tuple[str, int, int]
"""(route, generation, attempt ordinal): what one dispatch is for."""


@dataclass(frozen=True, slots=True)
class PacedReports:
    """What the paced reports achieved: how many, from the first sent to the last answered."""

    reports: int
    elapsed_s: float
    wrong_state: int

    @property
    def per_s(self) -> float:
        return self.reports / self.elapsed_s


async def paced_failures(handles: Sequence[RouteHandle], rate: float, window: int) -> PacedReports:
    """One transient failure per route, sent `rate` a second (at most `window` in flight:
    an orchestrator's window; a runtime that lags slows the load, which `PacedReports` shows)."""
    gate = asyncio.Semaphore(window)
    began = time.perf_counter()

    async def one(handle: RouteHandle) -> str:
        try:
            return (await fail(handle, 1)).state
        finally:
            gate.release()

    sent: list[asyncio.Task[str]] = []
    for index, handle in enumerate(handles):
        await asyncio.sleep(max(0.0, began + index / rate - time.perf_counter()))
        await gate.acquire()
        sent.append(asyncio.create_task(one(handle)))
    states = await asyncio.gather(*sent)
    wrong = sum(1 for state in states if state != "retry_wait")
    return PacedReports(len(handles), time.perf_counter() - began, wrong)


@dataclass
class DispatchLog:
    """The recording dispatcher's log, read as it grows."""

    path: str
    offset: int = 0

    def read(self) -> list[DispatchRecord]:
        records, self.offset = read_log(self.path, self.offset)
        return records

    async def wait_for(self, routes: frozenset[str], timeout_s: float) -> list[DispatchRecord]:
        """Every record of `routes` until each route was dispatched at least once; records
        of other routes are dropped."""
        deadline = time.monotonic() + timeout_s
        found: list[DispatchRecord] = []
        seen: set[str] = set()
        while len(seen) < len(routes):
            if time.monotonic() > deadline:
                done = f"{len(seen)} of {len(routes)}"
                raise TimeoutError(f"{done} routes dispatched in {timeout_s:g} s")
            await asyncio.sleep(POLL_S)
            fresh = [record for record in self.read() if record.route_id in routes]
            found += fresh
            seen.update(record.route_id for record in fresh)
        return found


@dataclass(frozen=True, slots=True)
class Timing:
    """One dispatched attempt: its deadline, its timer's fire and the dispatcher's call
    (epoch seconds)."""

    deadline: float
    fired: float
    called: float


def attempt_of(record: DispatchRecord) -> Attempt:
    return (record.route_id, record.generation, record.ordinal)


def twice(records: Sequence[DispatchRecord]) -> int:
    """Attempts the dispatcher was called for more than once."""
    return sum(1 for count in Counter(map(attempt_of, records)).values() if count > 1)


def timing_of(history: Sequence[AttemptRecord], record: DispatchRecord) -> Timing:
    """The attempt's scheduled deadline and fire, from its route's history."""

    def of(decision: str) -> AttemptRecord:
        for entry in history:
            same = (entry.generation, entry.ordinal) == (record.generation, record.ordinal)
            if same and entry.decision == decision:
                return entry
        raise RuntimeError(f"route {record.route_id}: no {decision} record for {record!r}")

    deadline = of("retry").deadline
    if deadline is None:
        raise RuntimeError(f"route {record.route_id}: a retry without a deadline")
    return Timing(deadline.timestamp(), of("deadline_reached").at.timestamp(), record.at)


async def timings(store: RouteStore, records: Sequence[DispatchRecord]) -> list[Timing]:
    def read(record: DispatchRecord) -> Callable[[], Awaitable[Timing]]:
        async def one() -> Timing:
            return timing_of(await store.history(record.route_id), record)

        return one

    found: list[Timing] = await bounded(READ_CONCURRENCY, [read(r) for r in records])
    return found


def spread(prefix: str, values: Sequence[float]) -> dict[str, float]:
    return {
        f"{prefix}_p50_ms": ms(percentile(values, 0.50)),
        f"{prefix}_p99_ms": ms(percentile(values, 0.99)),
        f"{prefix}_max_ms": ms(max(values)),
    }


def figures(found: Sequence[Timing]) -> dict[str, Any]:
    """Timer lateness (fire - deadline), deadline to the dispatcher's call, and fire to
    call (the enqueue, rq and the job before the dispatcher)."""
    return {
        **spread("timer_lateness", [t.fired - t.deadline for t in found]),
        **spread("deadline_to_dispatch", [t.called - t.deadline for t in found]),
        **spread("fire_to_dispatch", [t.called - t.fired for t in found]),
    }
