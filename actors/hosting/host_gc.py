"""The garbage collector of a host process, tuned for batches of transitions.

A round of 256 transitions allocates tens of thousands of short-lived containers
(models, dicts, tuples), nearly all freed by reference counting; at CPython's default
threshold (700 allocations) the young generation is still collected dozens of times per
round, each pass walking what is alive at that moment (the round's work in progress):
~20-40 µs per transition (issue 23). A larger young generation runs the collector once
or twice per round. Only garbage in reference cycles waits longer for it: at most about
`YOUNG_THRESHOLD` container objects (a few MiB), measured by bench/host_profile.py.
The long-lived state (the catalogue's rules, the route timers, the modules) is frozen
out of every collection once the host has rehydrated (docs/DESIGN.md §5a: full
collections are the tail of timer lateness).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable
from typing import Final

from catalogue import default_catalogue

YOUNG_THRESHOLD: Final = 50_000
"""Allocations (net of frees) of container objects between two young collections."""
OLDER_THRESHOLDS: Final = (20, 100)
"""Young collections per middle one; middle collections per full one (CPython's full
collection also waits until the long-lived objects grew by a quarter)."""


def settle_host_gc() -> None:
    """Collect what setup left, freeze everything alive into the permanent generation
    and raise the thresholds (see the module); call once the host has loaded."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)


async def warm_catalogue(*, after: Awaitable[object]) -> None:
    """Once `after` is done (a host's rehydration), compile the shipped catalogue's rules
    (~1 s of CPU) in a thread, then freeze them out of collections as `settle_host_gc`
    froze the rest. A host serves reads, timers and commands meanwhile (a restarted host
    is back that much sooner); a report that needs the catalogue first waits for this
    build rather than starting a second."""
    await after
    await asyncio.to_thread(default_catalogue)
    gc.freeze()
