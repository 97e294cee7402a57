"""Reading the runtime's metrics the way Prometheus does: from Ray's metrics export.

Ray pushes metrics to its export on its own period and the endpoint gives no notice of a
change, so `export_until` is the one wait in the suite that repeats a read: once per
`SCRAPE_EVERY_S`, well below Ray's report period, until the export shows what is wanted.
`scrape_until` reads this test session's Ray; `export_until` any export's URL (a running
`recovery up` prints its own).
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable, Iterable
from typing import Final

import ray

SCRAPE_EVERY_S: Final = 0.5


def session_export_url() -> str:
    port = ray.nodes()[0]["MetricsExportPort"]  # type: ignore[no-untyped-call]  # ray is untyped
    return f"http://127.0.0.1:{port}/metrics"


def read_export(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def export_until(url: str, until: Callable[[str], bool], timeout: float) -> str:
    """The first read of the export at `url` for which `until` is true; TimeoutError when
    none is within `timeout` (which only guards against a hang)."""
    started = time.monotonic()
    while True:
        found = read_export(url)
        if until(found):
            return found
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"metrics at {url} not as wanted within {timeout} s")
        time.sleep(SCRAPE_EVERY_S)


def samples(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name)]


async def scrape_until(
    names: Iterable[str], timeout: float, until: Callable[[str], bool] | None = None
) -> str:
    """The first scrape that has samples of every name in `names` (and for which `until`,
    when given, is true); TimeoutError when none does within `timeout` (which only guards
    against a hang)."""
    wanted = tuple(names)

    def settled(found: str) -> bool:
        return all(samples(found, name) for name in wanted) and (until is None or until(found))

    return await asyncio.to_thread(export_until, session_export_url(), settled, timeout)
