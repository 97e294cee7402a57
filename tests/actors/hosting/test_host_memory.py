"""A route host reports its memory for bench/timers.py: tracemalloc's count while tracing
(None otherwise) and the resident set. The host runs in this process (no Ray) on the
session's real Redis, so an allocation the test keeps alive shows in the host's report."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from actors.hosting.host_gc import OLDER_THRESHOLDS, YOUNG_THRESHOLD
from actors.hosting.route_host import RouteHost
from actors.keys import KeySpace
from tests.actors.conftest import _delete_prefix, unique_keys

pytestmark = pytest.mark.integration

KEPT_BYTES = 1 << 20


@pytest.fixture
def keys(redis_url: str) -> Iterator[KeySpace]:
    chosen = unique_keys()
    yield chosen
    _delete_prefix(redis_url, chosen)


def test_a_traced_host_counts_what_stays_allocated_and_stops_counting_when_told(
    redis_url: str, keys: KeySpace
) -> None:
    async def scenario() -> None:
        host = RouteHost("host-0", redis_url, keys.prefix)
        try:
            await host.ready()
            assert (await host.memory_report()).traced_bytes is None
            before = await host.start_tracing()
            kept = bytearray(KEPT_BYTES)
            during = await host.memory_report(stop_tracing=True)
            after = await host.memory_report()
        finally:
            await host.aclose()
        assert before.traced_bytes is not None
        assert during.traced_bytes is not None
        assert during.traced_bytes - before.traced_bytes >= len(kept)
        assert during.rss_bytes > 0
        assert after.traced_bytes is None

    asyncio.run(scenario())


def test_a_rehydrated_host_runs_the_collector_at_its_own_thresholds_with_setup_frozen(
    redis_url: str, keys: KeySpace
) -> None:
    before = gc.get_threshold()

    async def scenario() -> tuple[tuple[int, ...], int]:
        host = RouteHost("host-0", redis_url, keys.prefix)
        try:
            await host.ready()
            return gc.get_threshold(), gc.get_freeze_count()
        finally:
            await host.aclose()

    try:
        thresholds, frozen = asyncio.run(scenario())
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
    assert thresholds == (YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    assert frozen > 0, "what setup left alive is out of every collection"
