"""The phases of bench/stampede.py: park a fleet on an open circuit through the real
runtime, follow its probe and release waves, and the naive TTL-cooldown baseline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from redis.asyncio import Redis
from stampede_dispatcher import records_key
from stampede_figures import Interval, Sent
from timer_phases import TRANSPORT_LOST, retry_profile

from actors.errors import RecoveryError
from actors.hosting.handle import RouteHandle
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.routes.circuit_board import REASON_PARKED
from actors.routes.circuit_models import CircuitView
from actors.routes.models import RouteSnapshot
from actors.store.circuit_store import CircuitStore
from actors.store.route_store import RouteStore
from catalogue import Evidence, EvidenceKind
from circuits import CircuitStatus
from policy import (
    Candidate,
    ClassPolicy,
    DynamicProfile,
    Outcome,
    RetryPolicy,
    TurnEvidence,
    WaitForResetPolicy,
)

RATE_LIMIT_BODY: Final = (
    '{"type":"error","error":{"type":"rate_limit_error","message":"Number of request '
    'tokens has exceeded your per-minute rate limit"}}'
)
SAFE_TURN: Final = TurnEvidence(
    execution_id="exec-bench-stampede", prompt_generation=1, output_observed=False,
    thoughts_observed=False, tool_call_started=False, tool_call_completed=False,
    partial_utility_result=False, ambiguous_delivery=False,
)  # fmt: skip
PARKED_STATES: Final = frozenset({"retry_wait", "waiting_for_reset"})
READ_BATCH: Final = 500
POP_WAIT_S: Final = 1
WARM_TIMEOUT_S: Final = 60.0


def rate_limited(retry_after_s: int) -> Evidence:
    """Anthropic's 429 rate_limit_error with a Retry-After header: rate_limited (account
    scope, transient) with a trusted reset, which opens the circuit at once."""
    return Evidence(
        kind=EvidenceKind.HTTP, http_status=429, provider="anthropic",
        headers={"retry-after": str(retry_after_s)}, body=RATE_LIMIT_BODY,
    )  # fmt: skip


def profile() -> DynamicProfile:
    """One Claude candidate: a transient failure with a trusted reset waits for it (up to
    60 s, once per cycle), else it is retried 3 x from 30 s, then stop. So each route's
    own wait ends at the 429's reset, when the circuit opened by it (open until that reset,
    plus its jitter) expires: every route is parked on the circuit and due at its expiry."""
    retry = RetryPolicy(enabled=True, max_retries=3, initial_interval_seconds=30)
    wait = WaitForResetPolicy(enabled=True, max_wait_seconds=60)
    transient = ClassPolicy(retry=retry, wait_for_reset=wait, on_exhausted=Outcome.STOP)
    candidate = Candidate(
        id="claude", agent="claude-acp", provider="anthropic", transient=transient,
        hard=ClassPolicy.immediately(Outcome.STOP),
    )  # fmt: skip
    return DynamicProfile(candidates=(candidate,))


def invocation(route_id: str) -> str:
    return f"inv-{route_id}"


# Ours: the real runtime


@dataclass(frozen=True, slots=True)
class Rig:
    runtime: RecoveryRuntime
    routes: RouteStore
    circuits: CircuitStore
    raw: Redis
    keys: KeySpace


async def park_fleet(rig: Rig, size: int, retry_after_s: int, window: int) -> list[str]:
    """Start `size` routes, then each reports the rate limit (at most `window` calls in
    flight): the first report opens the provider's circuit, every route parks on it."""
    ids = [f"stampede-{n}" for n in range(size)]
    handles = [rig.runtime.route(route_id) for route_id in ids]
    chosen, evidence = profile(), rate_limited(retry_after_s)

    async def start(handle: RouteHandle) -> RouteSnapshot:
        rid = handle.route_id
        return await handle.start(chosen, caller="kanban", invocation_id=invocation(rid))

    async def fail(handle: RouteHandle) -> RouteSnapshot:
        rid = handle.route_id
        return await handle.report_failure(
            1, evidence, SAFE_TURN, caller="kanban", invocation_id=invocation(rid)
        )

    await each(window, handles, start)
    await each(window, handles, fail)
    return ids


async def each(
    window: int, handles: Sequence[RouteHandle], call: Callable[[RouteHandle], Awaitable[Any]]
) -> None:
    """`call` on every handle, at most `window` at once (an orchestrator's window)."""
    gate = asyncio.Semaphore(window)

    async def one(handle: RouteHandle) -> None:
        async with gate:
            await call(handle)

    await asyncio.gather(*(one(handle) for handle in handles))


async def parked_circuit(rig: Rig, ids: Sequence[str]) -> CircuitView:
    """The one circuit, read from Redis: open, with every route parked on it (each route
    waiting with reason circuit_open on that circuit)."""
    circuits = await rig.circuits.all_circuits()
    if len(circuits) != 1 or circuits[0].status is not CircuitStatus.OPEN:
        raise RuntimeError(f"expected one open circuit, found {circuits!r}")
    (view,) = circuits
    wrong = [
        s
        for s in await snapshots(rig.routes, ids)
        if s.state not in PARKED_STATES
        or s.reason != REASON_PARKED
        or s.circuit != view.resource_id
    ]
    if wrong or view.parked != len(ids):
        sample = [(s.route_id, s.state, s.reason) for s in wrong[:2]]
        raise RuntimeError(
            f"{len(wrong)} routes not parked, circuit parked {view.parked}: {sample}"
        )
    return view


async def snapshots(routes: RouteStore, ids: Sequence[str]) -> list[RouteSnapshot]:
    found: list[RouteSnapshot] = []
    for start in range(0, len(ids), READ_BATCH):
        found += await routes.snapshots(ids[start : start + READ_BATCH])
    return found


@dataclass
class Followed:
    """What the bench saw after the expiry: every send, and the close it caused."""

    sent: list[Sent] = field(default_factory=list)
    close_sent_at: float | None = None  # the probe's success report was sent (wall clock)
    after_close: CircuitView | None = None  # read right after the close
    refused_successes: int = 0


async def arrivals(rig: Rig, expected: int, timeout_s: float) -> AsyncIterator[Sent]:
    """Each send the dispatcher records, as it lands, until `expected` were seen."""
    key = records_key(rig.keys.prefix)
    deadline = time.monotonic() + timeout_s
    seen = 0
    while seen < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{seen} of {expected} sends seen in {timeout_s:.0f} s")
        popped = await rig.raw.blpop([key], timeout=POP_WAIT_S)
        if popped is None:
            continue
        more = await rig.raw.lpop(key, expected) or []
        for text in [popped[1], *more]:
            seen += 1
            yield Sent.from_json(text)


async def follow(
    rig: Rig, view: CircuitView, expected: int, timeout_s: float, *, report_released: bool
) -> Followed:
    """As the orchestrator: report the probe's success as soon as its send ended (that
    closes the circuit), then (`report_released`) every released route's success once its
    send ended, until `expected` sends were seen."""
    seen = Followed()
    reports: list[asyncio.Task[None]] = []
    async for sent in arrivals(rig, expected, timeout_s):
        seen.sent.append(sent)
        if sent.probe and seen.close_sent_at is None:
            await close_by_probe(rig, view, sent, seen)
        elif report_released:
            reports.append(asyncio.create_task(succeed(rig, sent, seen)))
    await asyncio.gather(*reports)
    return seen


async def close_by_probe(rig: Rig, view: CircuitView, probe: Sent, seen: Followed) -> None:
    seen.close_sent_at = time.time()
    await rig.runtime.route(probe.route_id).report_success(probe.generation)
    seen.after_close = await rig.circuits.view(view.resource)


async def succeed(rig: Rig, sent: Sent, seen: Followed) -> None:
    try:
        await rig.runtime.route(sent.route_id).report_success(sent.generation)
    except RecoveryError:
        seen.refused_successes += 1


# Warming the workers


async def warm_workers(rig: Rig, count: int, window: int) -> int:
    """`count` dispatches of other routes (a transport loss: no circuit; retried in 1 s)
    before anything is measured: a worker's first job imports the whole dispatch path,
    seconds of CPU here. Their records are drained; how many workers ran one."""
    handles = [rig.runtime.route(f"warm-{n}") for n in range(count)]
    warm = retry_profile(1)

    async def dispatch(handle: RouteHandle) -> None:
        rid = handle.route_id
        await handle.start(warm, caller="kanban", invocation_id=invocation(rid))
        await handle.report_failure(
            1, TRANSPORT_LOST, SAFE_TURN, caller="kanban", invocation_id=invocation(rid)
        )  # retried by the host's timer 1 s later

    await each(window, handles, dispatch)
    sent = [s async for s in arrivals(rig, count, WARM_TIMEOUT_S)]
    seen = Followed()
    await asyncio.gather(*(succeed(rig, s, seen) for s in sent))
    return len({s.worker for s in sent})


# The naive baseline: a TTL cooldown


@dataclass(frozen=True, slots=True)
class TtlCooldown:
    """A gateway's cooldown of one deployment: no call until `until`; nothing decides
    who goes first after it."""

    until: float

    async def wait(self) -> None:
        await asyncio.sleep(max(0.0, self.until - time.time()))


async def naive(callers: int, cooldown_s: float, latency_s: float) -> tuple[float, list[Interval]]:
    """`callers` parked on one TTL cooldown of `cooldown_s`; at its expiry each retries:
    one send of `latency_s`. The expiry and every send's interval."""
    cooldown = TtlCooldown(time.time() + cooldown_s)

    async def caller() -> Interval:
        await cooldown.wait()
        started = time.time()
        await asyncio.sleep(latency_s)  # the send, as the bench dispatcher's
        return Interval(started, time.time())

    intervals = await asyncio.gather(*(caller() for _ in range(callers)))
    return cooldown.until, list(intervals)
