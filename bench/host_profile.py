"""Where a route host's CPU goes per failure transition (issue 23's profile table).

One RouteHost, in this process (no Ray: the host class itself, its circuits written by
itself, `circuit_hosts=0`), on an embedded Redis: a fleet is started, a warm-up burst opens
the provider's circuit, then every route of the measured fleet reports the failure of
bench/transitions.py in batches of `--batch` (what a HostBatcher sends). Measured twice on
fleets of their own: plain, alternately with CPython's default collector thresholds and
the host's (actors/hosting/host_gc.py), `--pairs` bursts each (process CPU time and the
collector's own time per transition, RSS after each burst; the median burst of each
side), then once under cProfile with the host's (`top`: the functions with the most own
time, µs per transition, inflated by the profiler's overhead). Ray's share (pickling the
batch and the replies) is not in here. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import time
import uuid
from collections.abc import Sequence
from typing import Any, Final

import psutil  # type: ignore[import-untyped]  # ships no stubs; installed with ray
import transitions as bench
from bench_common import chunks, print_json_line, redis_url

from actors.engine.settings import EngineSettings
from actors.hosting.host_gc import OLDER_THRESHOLDS, YOUNG_THRESHOLD
from actors.hosting.route_host import RouteHost
from actors.routes.commands import ReportFailure, Start
from actors.routes.models import RouteSnapshot
from circuits import CircuitSettings

HOST_ID: Final = "profiled"
DEFAULT_THRESHOLDS: Final = (700, 10, 10)  # CPython's


async def run_all(host: RouteHost, items: Sequence[Any], batch: int) -> None:
    for part in chunks(items, batch):
        for answer in await host.run_batch(list(part)):
            if not isinstance(answer, RouteSnapshot):
                raise RuntimeError(f"expected a snapshot, got {answer!r}")


async def start(host: RouteHost, tag: str, size: int, batch: int) -> list[str]:
    route_ids = [f"{tag}-{n}" for n in range(size)]
    profile = bench.bench_profile()
    await run_all(host, [(r, Start(profile, "kanban", f"inv-{r}")) for r in route_ids], batch)
    return route_ids


def reports(route_ids: Sequence[str]) -> list[tuple[str, ReportFailure]]:
    return [
        (r, ReportFailure(1, bench.EVIDENCE, bench.SAFE_TURN, "kanban", f"inv-{r}"))
        for r in route_ids
    ]


def top_functions(profile: cProfile.Profile, transitions: int, count: int) -> list[Any]:
    stats = pstats.Stats(profile)
    rows = []
    for (path, line, name), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]  # pstats keeps its table untyped
        where = f"{path.rsplit('/', 2)[-1] if '/' in path else path}:{line}:{name}"
        rows.append((own, cumulative, calls, where))
    rows.sort(reverse=True)
    scale = 1e6 / transitions
    return [
        {"function": where, "own_us": round(own * scale, 1), "cum_us": round(cum * scale, 1),
         "calls": round(calls / transitions, 2)}
        for own, cum, calls, where in rows[:count]
    ]  # fmt: skip


class GcClock:
    """The time the collector ran, from gc.callbacks (start/stop of each collection)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._began = 0.0

    def __call__(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began
            self.collections += 1


async def burst(host: RouteHost, route_ids: Sequence[str], batch: int, gc_clock: GcClock) -> Any:
    """CPU and collector time per transition of one burst, and the RSS after it."""
    seconds, collections = gc_clock.seconds, gc_clock.collections
    began = time.process_time()
    await run_all(host, reports(route_ids), batch)
    cpu = time.process_time() - began
    return {
        "cpu_us": round(1e6 * cpu / len(route_ids), 1),
        "gc_us": round(1e6 * (gc_clock.seconds - seconds) / len(route_ids), 1),
        "collections": gc_clock.collections - collections,
        "rss_mib": round(psutil.Process().memory_info().rss / 2**20, 1),
    }


def median_burst(bursts: list[Any]) -> Any:
    return sorted(bursts, key=lambda figures: figures["cpu_us"])[len(bursts) // 2]


GC_SIDES: Final = {"default": DEFAULT_THRESHOLDS, "host": (YOUNG_THRESHOLD, *OLDER_THRESHOLDS)}


async def run(size: int, batch: int, count: int, pairs: int) -> dict[str, Any]:
    async with redis_url() as (url, _server):
        settings = EngineSettings(
            key_prefix=f"bench.profile.{uuid.uuid4().hex[:12]}", circuit_hosts=0,
            circuit_settings=CircuitSettings(initial_backoff_s=600.0),
        )  # fmt: skip
        host = RouteHost(HOST_ID, url, settings)
        await host.ready()  # settles the collector as a host does (actors/hosting/host_gc.py)
        warm = await start(host, "warm", batch, batch)
        fleets = {
            (side, n): await start(host, f"{side}{n}", size, batch)
            for n in range(pairs) for side in GC_SIDES
        }  # fmt: skip
        profiled = await start(host, "profiled", size, batch)
        await run_all(host, reports(warm), batch)  # opens the circuit
        gc_clock = GcClock()
        gc.callbacks.append(gc_clock)
        by_side: dict[str, list[Any]] = {side: [] for side in GC_SIDES}
        for (side, _), route_ids in fleets.items():  # alternately: default, host, ...
            gc.set_threshold(*GC_SIDES[side])
            by_side[side].append(await burst(host, route_ids, batch, gc_clock))
        gc.callbacks.remove(gc_clock)
        gc.set_threshold(*GC_SIDES["host"])
        profile = cProfile.Profile()
        profile.enable()
        await run_all(host, reports(profiled), batch)
        profile.disable()
        await host.aclose()
    middle = {
        side: sorted(b, key=lambda f: f["cpu_us"])[len(b) // 2] for side, b in by_side.items()
    }
    return {
        "routes": size,
        "batch": batch,
        "cpu_us_per_transition": middle["host"]["cpu_us"],
        "gc_us_per_transition": middle["host"]["gc_us"],
        "default_gc": {"cpu_us_per_transition": middle["default"]["cpu_us"],
                       "gc_us_per_transition": middle["default"]["gc_us"]},
        "bursts": by_side,
        "top": top_functions(profile, size, count),
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--routes", type=int, default=2048, help="reports per burst")
    parser.add_argument("--batch", type=int, default=256, help="reports per host batch")
    parser.add_argument("--top", type=int, default=40, help="functions listed")
    parser.add_argument("--pairs", type=int, default=3, help="bursts per collector setting")
    args = parser.parse_args(argv)
    print_json_line(lambda: asyncio.run(run(args.routes, args.batch, args.top, args.pairs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
