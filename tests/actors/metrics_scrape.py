"""Reading the runtime's metrics the way Prometheus does: from Ray's metrics export.

Ray pushes metrics to its export on its own period and the endpoint gives no notice of a
change, so `scrape_until` is the one wait in the suite that repeats a read: once per
`SCRAPE_EVERY_S`, well below Ray's report period, until every expected name is there.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable, Iterable
from typing import Final

import ray

SCRAPE_EVERY_S: Final = 0.5


def scrape() -> str:
    port = ray.nodes()[0]["MetricsExportPort"]  # type: ignore[no-untyped-call]  # ray is untyped
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def samples(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name)]


async def scrape_until(
    names: Iterable[str], timeout: float, until: Callable[[str], bool] | None = None
) -> str:
    """The first scrape that has samples of every name in `names` (and for which `until`,
    when given, is true); TimeoutError when none does within `timeout` (which only guards
    against a hang)."""
    wanted = tuple(names)
    started = time.monotonic()
    while True:
        found = await asyncio.to_thread(scrape)
        if all(samples(found, name) for name in wanted) and (until is None or until(found)):
            return found
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"metrics {wanted} not exported within {timeout} s")
        await asyncio.sleep(SCRAPE_EVERY_S)
