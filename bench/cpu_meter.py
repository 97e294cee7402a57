"""Where the CPU of a measured burst went: the driver, the route hosts, the circuit hosts
and the Redis server, each as process CPU time, plus Redis's own per-command tally.

A rate alone swings with whatever else the machine runs; CPU per transition is the stable
figure (a busy neighbour slows a burst down, it does not make it cost more CPU). The
driver is this process (`time.process_time`), the hosts are read from /proc by process
id (Linux: utime + stime, clock ticks), Redis from `INFO cpu` and `INFO commandstats`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from redis.asyncio import Redis

T = TypeVar("T")

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# Fields 14 and 15 of /proc/<pid>/stat (utime, stime), counted after the ")" that ends the
# command name (which may itself hold spaces): indexes 11 and 12 of what follows it.
_UTIME, _STIME = 11, 12


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[_UTIME]) + int(fields[_STIME])) / _TICKS_PER_S


Commands = dict[str, tuple[int, int]]
"""Redis command name -> (calls, microseconds), from INFO commandstats."""


@dataclass(frozen=True, slots=True)
class CpuSample:
    """Cumulative CPU seconds at one moment, per side."""

    driver_s: float
    hosts_s: float
    circuit_hosts_s: float
    redis_s: float
    commands: Commands


@dataclass(frozen=True, slots=True)
class CpuSpent:
    """The CPU a measured stretch used, per side (the difference of two samples)."""

    driver_s: float
    hosts_s: float
    circuit_hosts_s: float
    redis_s: float
    commands: Commands

    @classmethod
    def between(cls, before: CpuSample, after: CpuSample) -> CpuSpent:
        commands: Commands = {}
        for name, (calls, usec) in after.commands.items():
            was_calls, was_usec = before.commands.get(name, (0, 0))
            if calls > was_calls:
                commands[name] = (calls - was_calls, usec - was_usec)
        return cls(
            after.driver_s - before.driver_s, after.hosts_s - before.hosts_s,
            after.circuit_hosts_s - before.circuit_hosts_s, after.redis_s - before.redis_s,
            commands,
        )  # fmt: skip

    def per_transition(self, transitions: int) -> dict[str, Any]:
        """CPU microseconds per transition, per side, and Redis's calls and command time
        per transition by command."""
        each = 1e6 / max(transitions, 1)
        return {
            "driver": round(self.driver_s * each, 1),
            "hosts": round(self.hosts_s * each, 1),
            "circuit_hosts": round(self.circuit_hosts_s * each, 1),
            "redis": round(self.redis_s * each, 1),
            "redis_commands": {
                name: {"calls": round(calls / max(transitions, 1), 2),
                       "usec": round(usec / max(transitions, 1), 1)}
                for name, (calls, usec) in sorted(self.commands.items())
            },
        }  # fmt: skip


async def redis_cpu_s(client: Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def redis_commands(client: Redis) -> Commands:
    info: Mapping[str, Any] = await client.info("commandstats")
    return {
        key.removeprefix("cmdstat_"): (int(value["calls"]), int(value["usec"]))
        for key, value in info.items()
        if key.startswith("cmdstat_")
    }


@dataclass(frozen=True, slots=True)
class CpuMeter:
    """Samples every side's CPU around a measured awaitable."""

    redis: Redis
    host_pids: Sequence[int] = ()
    circuit_host_pids: Sequence[int] = ()

    async def sample(self) -> CpuSample:
        # Redis first, then the processes: the INFO calls themselves are the driver's.
        commands = await redis_commands(self.redis)
        redis_s = await redis_cpu_s(self.redis)
        return CpuSample(
            time.process_time(), sum(process_cpu_s(pid) for pid in self.host_pids),
            sum(process_cpu_s(pid) for pid in self.circuit_host_pids), redis_s, commands,
        )  # fmt: skip

    async def measure(self, measured: Callable[[], Awaitable[T]]) -> tuple[T, CpuSpent]:
        """What `measured()` returned and the CPU every side spent while it ran."""
        before = await self.sample()
        result = await measured()
        return result, CpuSpent.between(before, await self.sample())
