"""The ABAB pairs of bench/transitions.py and what they sum up to.

The runtime and the raw CAS are measured alternately (runtime, raw, runtime, raw, ...),
each pair on fresh routes, so a drift of the machine (a neighbour's load, a GC, Redis
growing) weighs on both sides of every pair; the headline ratio is the median of the
pairs' ratios, never the ratio of two bursts run tens of seconds apart.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench_common import Figure
from cpu_meter import CpuSpent


@dataclass(frozen=True, slots=True)
class Pair:
    """One runtime burst and the raw CAS burst measured right after it."""

    runtime: Figure
    runtime_cpu: CpuSpent
    raw: Figure
    raw_cpu: CpuSpent
    raw_in_flight: int  # pipelines in flight of the raw burst
    batch_sizes: Counter[int]  # the runtime burst's Ray calls, by batch size

    @property
    def ratio(self) -> float:
        return self.runtime.per_s / self.raw.per_s


def with_cpu(figure: Figure, cpu: CpuSpent) -> dict[str, Any]:
    """A figure's summary with its CPU per transition, per side."""
    return {**figure.summary(), "cpu_us_per_transition": cpu.per_transition(figure.transitions)}


def median_cpu(spent: Sequence[tuple[Figure, CpuSpent]]) -> dict[str, Any]:
    """The median over bursts of each side's CPU per transition (Redis's commands: the
    last burst's tally, which is the same script calls each time)."""
    each = [cpu.per_transition(figure.transitions) for figure, cpu in spent]
    sides = ("driver", "hosts", "circuit_hosts", "redis")
    return {
        **{side: round(statistics.median(e[side] for e in each), 1) for side in sides},
        "redis_commands": each[-1]["redis_commands"],
    }


def batch_size_summary(sizes: Counter[int]) -> dict[str, Any]:
    """The distribution of batch sizes (items per Ray call to a host)."""
    ordered = sorted(sizes.elements())
    if not ordered:
        return {"batches": 0}
    buckets: Counter[str] = Counter()
    for size, count in sizes.items():
        top = 1
        while top < size:
            top *= 2
        buckets[f"<={top}"] += count
    return {
        "batches": len(ordered),
        "mean": round(statistics.fmean(ordered), 1),
        "p50": ordered[len(ordered) // 2],
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max": ordered[-1],
        "by_bucket": dict(sorted(buckets.items(), key=lambda item: int(item[0][2:]))),
    }


def pairs_summary(pairs: Sequence[Pair]) -> dict[str, Any]:
    """The median pair's ratio and the runtime's figures, each pair's ratio beside them."""
    ratios = [pair.ratio for pair in pairs]
    middle = sorted(pairs, key=lambda pair: pair.ratio)[len(pairs) // 2]
    sizes: Counter[int] = Counter()
    for pair in pairs:
        sizes.update(pair.batch_sizes)
    return {
        "ratio": round(statistics.median(ratios), 3),
        "pair_ratios": [round(ratio, 3) for ratio in ratios],
        "transitions_per_s": round(statistics.median(p.runtime.per_s for p in pairs), 1),
        "raw_cas_per_s": round(statistics.median(p.raw.per_s for p in pairs), 1),
        "runtime_cpu_us_per_transition": median_cpu([(p.runtime, p.runtime_cpu) for p in pairs]),
        "raw_cpu_us_per_transition": median_cpu([(p.raw, p.raw_cpu) for p in pairs]),
        "batch_sizes": batch_size_summary(sizes),
        "median_pair": {
            "runtime": middle.runtime.summary(),
            "raw_cas": {**middle.raw.summary(), "pipelines_in_flight": middle.raw_in_flight},
        },
    }
