"""The orchestrator's path for bench/transitions.py: route handles -> HostBatcher -> one
Ray call per host and batch -> RouteHost.run_batch -> one pipelined read and write.

A RecoveryRuntime with `hosts` route hosts (async Ray actors on a local Ray started here)
on the bench's Redis and key prefix. The fleet is started beforehand
(bench/transitions.py), then every route reports the same transient failure with at most
`concurrency` reports in flight (an orchestrator's window); each report's latency runs
from its call to the returned snapshot. `single_reports` sends one report at a time.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Sequence
from typing import Any, Final

import ray
from bench_common import Figure, delete_keys
from redis.asyncio import Redis

from actors.hosting.handle import RouteHandle
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.routes.models import RouteSnapshot
from actors.store.route_store import RouteStore
from catalogue import Evidence
from circuits import CircuitSettings
from policy import TurnEvidence

RAY_CPUS: Final = 2


# The burst opens the provider's circuit; it stays open for the whole run (a circuit that
# came due mid-run would hand its probe to whichever report came next, and a route started
# on an open circuit starts parked: every measured fleet is started before the first burst).
# Below the bench profile's retry budget (30 s x 2^0..4, 930 s), so reports still park.
CIRCUIT_OPEN_S: Final = 600.0


def start_runtime(url: str, prefix: str, hosts: int) -> RecoveryRuntime:
    """A local Ray (no dashboard) and the runtime's hosts on it, ready to serve."""
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    circuits = CircuitSettings(initial_backoff_s=CIRCUIT_OPEN_S)
    return RecoveryRuntime(
        redis_url=url, key_prefix=prefix, host_count=hosts, circuit_settings=circuits
    ).start()


async def process_ids(hosts: Sequence[Any]) -> list[int]:
    """The process ids of Ray actors that answer `process_id` (route and circuit hosts)."""
    return [int(await host.process_id.remote()) for host in hosts]


def stop_runtime(runtime: RecoveryRuntime) -> None:
    runtime.shutdown()
    ray.shutdown()


async def tear_down(
    runtime: RecoveryRuntime, raw: Redis, store: RouteStore, keys: KeySpace
) -> None:
    """The end of a run on a runtime of `start_runtime`: the process's frozen objects back
    to the collector, the runtime and its Ray stopped, the run's keys deleted, the clients
    closed."""
    gc.unfreeze()
    stop_runtime(runtime)
    await delete_keys(raw, keys)
    await raw.aclose()
    await store.aclose()


async def report(handle: RouteHandle, evidence: Evidence, turn: TurnEvidence) -> RouteSnapshot:
    return await handle.report_failure(
        1, evidence, turn, caller="kanban", invocation_id=f"inv-{handle.route_id}"
    )


async def burst(
    handles: Sequence[RouteHandle],
    evidence: Evidence,
    turn: TurnEvidence,
    concurrency: int,
    expected_state: str,
) -> Figure:
    latencies: list[float] = []
    from_burst: list[float] = []
    gate = asyncio.Semaphore(concurrency)

    async def one(handle: RouteHandle) -> None:
        async with gate:
            began = time.perf_counter()
            after = await report(handle, evidence, turn)
            ended = time.perf_counter()
        if after.state != expected_state:
            raise RuntimeError(f"expected {expected_state}, got {after!r}")
        latencies.append(ended - began)
        from_burst.append(ended - burst_began)

    cpu_began = time.process_time()
    burst_began = time.perf_counter()
    await asyncio.gather(*(one(handle) for handle in handles))
    elapsed = time.perf_counter() - burst_began
    return Figure(len(handles), elapsed, time.process_time() - cpu_began, latencies, from_burst)


async def single_reports(
    handles: Sequence[RouteHandle], evidence: Evidence, turn: TurnEvidence
) -> list[float]:
    latencies: list[float] = []
    for handle in handles:
        began = time.perf_counter()
        await report(handle, evidence, turn)
        latencies.append(time.perf_counter() - began)
    return latencies
