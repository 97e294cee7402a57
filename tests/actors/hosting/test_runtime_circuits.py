"""Circuits end to end through RecoveryRuntime: two Ray route hosts, real Redis, the
runtime's rq workers with the fake dispatcher. A handful of routes on both hosts hit a
usage limit, which opens their account circuit; they park until its reset; exactly one
probes; its success releases the others in waves; every attempt is dispatched at most
once; and the circuit metrics reach Ray's Prometheus export. Waits poll a condition with
a timeout that only guards against a hang."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import pytest
import redis

from actors.hosting.runtime import RecoveryRuntime, RouteHandle
from actors.keys import KeySpace
from actors.routes.circuit_board import REASON_PARKED
from actors.store.circuit_store import CircuitStore
from circuits import CircuitSettings
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.fake_dispatcher import calls_key
from tests.actors.metrics_scrape import samples, scrape_until
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, profile, reset_wait, safe_turn, usage_limit

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

TIMEOUT_S: Final = 60.0
# The reset the fleet waits for: far enough that every route has reported before it (a
# reset already past when a report is classified is dropped, as any past hint is).
PARK_MARGIN: Final = timedelta(seconds=8)
DELIVER: Final = "tests.actors.fake_dispatcher:deliver"
ROUTES_PER_HOST: Final = 3
CIRCUIT_METRICS: Final = (
    "ray_recovery_circuit_state_changes_total",
    "ray_recovery_circuit_state",
    "ray_recovery_circuit_probes_total",
    "ray_recovery_circuit_parked",
    "ray_recovery_circuit_released_total",
    "ray_recovery_dispatch_enqueued_total",
    "ray_recovery_dispatch_enqueue_seconds",
    "ray_recovery_timer_lateness_seconds",
)


def gauge(text: str, name: str, label: str) -> float | None:
    """The value of gauge `name` for circuit `label` in a scrape (None: not exported)."""
    for line in samples(text, name):
        if f'circuit="{label}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def waits_for_resets() -> DynamicProfile:
    """One candidate that waits up to a minute for a trusted reset of a hard failure."""
    return profile(candidate("claude", hard=reset_wait(60, Outcome.STOP)))


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = RecoveryRuntime(
        redis_url=redis_url, key_prefix=f"recovery-rc-{uuid.uuid4().hex[:12]}", host_count=2,
        dispatcher=DELIVER, circuit_settings=CircuitSettings(initial_backoff_s=1),
        probe_ttl_s=30, installation_key="runtime-circuits-test",
    ).start()  # fmt: skip
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(started.key_prefix))


def spread_routes(runtime: RecoveryRuntime) -> list[str]:
    """ROUTES_PER_HOST route ids owned by each host."""
    by_host: dict[int, list[str]] = {0: [], 1: []}
    number = 0
    while min(len(ids) for ids in by_host.values()) < ROUTES_PER_HOST:
        route_id = f"circuit-route-{number}"
        owned = by_host[runtime.host_index(route_id)]
        if len(owned) < ROUTES_PER_HOST:
            owned.append(route_id)
        number += 1
    return by_host[0] + by_host[1]


def dispatched(connection: redis.Redis, prefix: str) -> list[dict[str, Any]]:
    return [json.loads(item) for item in connection.lrange(calls_key(prefix), 0, -1)]


PARKED: Final = {("waiting_for_reset", REASON_PARKED), ("retry_wait", REASON_PARKED)}


async def park_all(routes: list[RouteHandle], reset: datetime) -> None:
    """The first route's usage limit opens the account's circuit; a route started after
    that is parked by its start (nothing is sent), one started before by its report."""
    for route in routes:
        invocation = f"inv-{route.route_id}"
        started = await route.start(waits_for_resets(), caller="kanban", invocation_id=invocation)
        if started.state == "active":
            parked = await route.report_failure(
                1, usage_limit(reset), safe_turn(), caller="kanban", invocation_id=invocation
            )
        else:
            parked = started
        assert (parked.state, parked.reason) in PARKED, parked
    assert (await routes[-1].snapshot()).state == "retry_wait"  # parked by its start


def test_parked_routes_on_two_hosts_get_one_probe_then_are_released_and_dispatched_once(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    prefix = runtime.key_prefix
    routes = [runtime.route(route_id) for route_id in spread_routes(runtime)]
    assert {runtime.host_index(r.route_id) for r in routes} == {0, 1}

    async def scenario() -> str:
        reset = datetime.now(UTC).replace(microsecond=0) + PARK_MARGIN
        await park_all(routes, reset)

        async def probing() -> bool:
            return len(dispatched(connection, prefix)) >= 1

        await wait_until(probing, TIMEOUT_S, redis_url=runtime.url)
        [probe_call] = dispatched(connection, prefix)
        probe = runtime.route(probe_call["route_id"])
        snapshot = await probe.snapshot()
        assert (snapshot.state, snapshot.probe_token is not None) == ("retrying", True)
        others = [r for r in routes if r.route_id != probe.route_id]
        # the losers of the probe race stay parked: none is retrying while it probes
        waiting = [await r.snapshot() for r in others]
        assert {(s.state, s.reason) for s in waiting} <= PARKED
        assert len(dispatched(connection, prefix)) == 1

        await probe.report_success(snapshot.generation)

        async def all_dispatched() -> bool:
            return len({c["route_id"] for c in dispatched(connection, prefix)}) == len(routes)

        await wait_until(all_dispatched, TIMEOUT_S, redis_url=runtime.url)
        keys = KeySpace(prefix)
        async with CircuitStore.connect(runtime.url, keys=keys) as store:
            (circuit,) = await store.all_circuits()
        label = circuit.resource.label

        def settled(text: str) -> bool:  # the gauges of this circuit now: closed, none parked
            return gauge(text, "ray_recovery_circuit_state{", label) == 0.0 and (
                gauge(text, "ray_recovery_circuit_parked{", label) == 0.0
            )

        return await scrape_until(CIRCUIT_METRICS, TIMEOUT_S, until=settled)

    text = asyncio.run(scenario())
    calls = dispatched(connection, prefix)
    attempts = Counter((c["route_id"], c["generation"], c["ordinal"]) for c in calls)
    assert set(attempts.values()) == {1}, attempts  # every attempt at most once
    assert {route_id for route_id, _, _ in attempts} == {r.route_id for r in routes}
    probes = samples(text, "ray_recovery_circuit_probes_total{")
    assert any('outcome="succeeded"' in line for line in probes), probes
    assert any('outcome="granted"' in line for line in probes), probes
    states = samples(text, "ray_recovery_circuit_state_changes_total{")
    assert any('state="open"' in line for line in states), states
    assert any('state="closed"' in line for line in states), states
    released = samples(text, "ray_recovery_circuit_released_total")
    assert sum(float(line.rsplit(" ", 1)[1]) for line in released) >= 1, released
