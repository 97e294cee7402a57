"""The probe lease is exclusive across clients, pools and OS processes on one real Redis;
a stale prober's late report changes nothing and an expired lease passes to exactly one.

The Lua guards are also driven directly (fakeredis[lua]): a plan that would hand out a
second lease, or a report by the wrong owner, is refused at the current version."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from redis.exceptions import ResponseError

from actors.errors import StoreUnavailableError
from actors.keys import KeySpace
from actors.store.circuit_codec import apply_request
from actors.store.circuit_store import CircuitStore
from circuits import (
    CircuitState,
    CircuitStatus,
    ProbeDenied,
    ProbeGrant,
    ResourceKey,
    acquire_probe,
)
from tests.actors.circuit_fixtures import RESOURCE, TTL_S, grant_of, hard, later, open_store
from tests.actors.conftest import Backend

integration = pytest.mark.integration
CONTENDERS = 50
WAIT_S = 60.0  # guards a hung child process; a healthy one answers in about a second


@asynccontextmanager
async def stores(backend: Backend, count: int) -> AsyncIterator[list[CircuitStore]]:
    """`count` stores, each with its own one-connection pool (a client each)."""
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(open_store(backend, max_connections=1))
            for _ in range(count)
        ]


async def open_until_passed(store: CircuitStore, backend: Backend) -> datetime:
    opened = await store.record_failure(RESOURCE, hard(), "route-a", backend.clock.now())
    assert opened.open_until is not None
    backend.clock.set(opened.open_until)
    return opened.open_until


def grants(results: list[ProbeGrant | ProbeDenied]) -> list[ProbeGrant]:
    return [r for r in results if isinstance(r, ProbeGrant)]


@integration
def test_fifty_concurrent_acquirers_on_separate_clients_get_exactly_one_lease(
    real_backend: Backend,
) -> None:
    async def scenario() -> None:
        async with stores(real_backend, CONTENDERS) as many:
            now = await open_until_passed(many[0], real_backend)
            results = await asyncio.gather(
                *(s.acquire_probe(RESOURCE, f"prober-{n}", now, TTL_S) for n, s in enumerate(many))
            )
            (winner,) = grants(results)
            denials = [r for r in results if isinstance(r, ProbeDenied)]
            assert len(denials) == CONTENDERS - 1
            assert {(d.holder, d.retry_at) for d in denials} == {(winner.holder, winner.expires_at)}
            view = await many[0].view(RESOURCE)
            assert (view.status, view.probe_holder) == (CircuitStatus.HALF_OPEN, winner.holder)
            assert view.version == 2  # opened, then exactly one lease written

    asyncio.run(scenario())


@integration
def test_an_expired_lease_passes_to_exactly_one_of_fifty_and_the_dead_probers_report_is_ignored(
    real_backend: Backend,
) -> None:
    async def scenario() -> None:
        async with stores(real_backend, CONTENDERS) as many:
            now = await open_until_passed(many[0], real_backend)
            dead = grant_of(await many[0].acquire_probe(RESOURCE, "dead-prober", now, TTL_S))
            during = later(real_backend, TTL_S - 1)
            still = await many[1].acquire_probe(RESOURCE, "early", during, TTL_S)
            assert isinstance(still, ProbeDenied)
            assert still.holder == "dead-prober"
            after = later(real_backend, 1)  # exactly at expiry: the lease is over
            results = await asyncio.gather(
                *(s.acquire_probe(RESOURCE, f"next-{n}", after, TTL_S) for n, s in enumerate(many))
            )
            (winner,) = grants(results)
            assert winner.owner_token != dead.owner_token
            late = await many[2].report_probe(
                RESOURCE, dead.owner_token, True, later(real_backend, 2)
            )
            assert not late.accepted
            assert late.view.status is CircuitStatus.HALF_OPEN
            assert late.view.probe_holder == winner.holder
            closed = await many[3].report_probe(
                RESOURCE, winner.owner_token, True, real_backend.clock.now()
            )
            assert closed.accepted
            assert closed.view.status is CircuitStatus.CLOSED

    asyncio.run(scenario())


@integration
def test_two_runtimes_with_their_own_pools_never_hold_the_lease_at_once(
    real_backend: Backend,
) -> None:
    async def scenario() -> None:
        async with open_store(real_backend) as runtime_a, open_store(real_backend) as runtime_b:
            now = await open_until_passed(runtime_a, real_backend)
            for round_number in range(5):  # each round: the lease expires, both fleets race
                results = await asyncio.gather(
                    *(
                        store.acquire_probe(RESOURCE, f"{name}-{n}", now, TTL_S)
                        for n in range(CONTENDERS // 2)
                        for name, store in (("a", runtime_a), ("b", runtime_b))
                    )
                )
                assert len(grants(results)) == 1, f"round {round_number}"
                now = later(real_backend, TTL_S)

    asyncio.run(scenario())


def _acquire_in_process(job: dict[str, str], start: Any, out: Any) -> None:
    """One OS process standing for one runtime: its own store, 25 concurrent acquirers
    released together with the other process by a barrier."""
    name = job["name"]

    async def race() -> list[str]:
        async with CircuitStore.connect(job["url"], keys=KeySpace(job["prefix"])) as store:
            key = ResourceKey.model_validate_json(job["resource"])
            when = datetime.fromisoformat(job["now"])
            await asyncio.to_thread(start.wait, WAIT_S)
            results = await asyncio.gather(
                *(store.acquire_probe(key, f"{name}-{n}", when, TTL_S) for n in range(25))
            )
            return [r.kind for r in results]

    out.put((name, asyncio.run(race())))


@integration
def test_two_os_processes_racing_for_the_lease_get_exactly_one_between_them(
    real_backend: Backend,
) -> None:
    async def prepare() -> datetime:
        async with open_store(real_backend) as store:
            return await open_until_passed(store, real_backend)

    now = asyncio.run(prepare())
    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(2), context.Queue()
    job = {
        "url": str(real_backend.url),
        "prefix": real_backend.keys.prefix,
        "resource": RESOURCE.model_dump_json(),
        "now": now.isoformat(),
    }
    workers = [
        context.Process(target=_acquire_in_process, args=({**job, "name": name}, start, out))
        for name in ("runtime-a", "runtime-b")
    ]
    for worker in workers:
        worker.start()
    try:
        kinds = dict(out.get(timeout=WAIT_S) for _ in workers)
    finally:
        for worker in workers:
            worker.join(timeout=WAIT_S)
    assert sorted(kinds) == ["runtime-a", "runtime-b"]
    granted = [name for name, results in kinds.items() for kind in results if kind == "granted"]
    assert len(granted) == 1
    assert sum(len(results) for results in kinds.values()) == 50


@integration
def test_a_thousand_parked_routes_racing_for_the_probe_give_one_probe_then_budgeted_waves(
    real_backend: Backend,
) -> None:
    routes = [f"parked-{n:04d}" for n in range(1000)]

    async def scenario() -> None:
        async with open_store(real_backend) as store:
            now = await open_until_passed(store, real_backend)
            await asyncio.gather(*(store.park(RESOURCE, r, now) for r in routes))
            results = await asyncio.gather(
                *(store.acquire_probe(RESOURCE, r, now, TTL_S) for r in routes)
            )
            (probe,) = grants(results)
            outcome = await store.report_probe(
                RESOURCE, probe.owner_token, True, later(real_backend, 5)
            )
            assert outcome.release is not None
            assert outcome.release.budget == 200
            assert [len(wave) for wave in outcome.release.waves] == [200] * 5
            assert {slot.route_id for slot in outcome.release.slots} == set(routes)
            assert outcome.view.parked == 1000

    asyncio.run(scenario())


# -- the Lua guards, driven directly ------------------------------------------------------


async def send(store: CircuitStore, state: CircuitState, expected: int, **guard: Any) -> Any:
    keys = [
        store.keys.circuit(RESOURCE.resource_id),
        store.keys.circuits,
        store.keys.parked(RESOURCE.resource_id),
    ]
    request = apply_request(RESOURCE, expected, state, guard.pop("now"), **guard)
    return await store.run_script(store.apply_script, keys, [request])


def test_the_script_refuses_a_second_lease_an_early_lease_and_a_wrong_owner_without_writing(
    fake_backend: Backend,
) -> None:
    async def scenario() -> None:
        async with open_store(fake_backend) as store:
            opened = await store.record_failure(RESOURCE, hard(), "r", fake_backend.clock.now())
            until = opened.open_until
            assert until is not None
            early = until - timedelta(seconds=1)
            planned, _ = acquire_probe(opened.state, "x", until, timedelta(seconds=TTL_S))
            refused = await send(store, planned, 1, now=early, guard="acquire")
            assert refused == [0, 1, "cooling_down"]
            stale = await send(store, planned, 0, now=until, guard="acquire")
            assert stale == [0, 1, "stale_version"]
            grant = grant_of(await store.acquire_probe(RESOURCE, "holder", until, TTL_S))
            before = await fake_backend.raw().hgetall(store.keys.circuit(RESOURCE.resource_id))
            held = await send(store, planned, 2, now=until, guard="acquire")
            assert held == [0, 2, "lease_held"]
            wrong = await send(store, planned, 2, now=until, guard="owner", token="1:x")
            assert wrong == [0, 2, "not_owner"]
            expired = until + timedelta(seconds=TTL_S)
            late = await send(
                store, planned, 2, now=expired, guard="owner", token=grant.owner_token
            )
            assert late == [0, 2, "not_owner"]
            after = await fake_backend.raw().hgetall(store.keys.circuit(RESOURCE.resource_id))
            assert after == before

    asyncio.run(scenario())


def test_the_script_refuses_a_lease_on_a_closed_circuit_and_an_unknown_guard(
    fake_backend: Backend,
) -> None:
    async def scenario() -> None:
        async with open_store(fake_backend) as store:
            now = fake_backend.clock.now()
            refused = await send(store, CircuitState(), 0, now=now, guard="acquire")
            assert refused == [0, 0, "closed"]
            with pytest.raises(ResponseError, match="unknown guard"):
                await send(store, CircuitState(), 0, now=now, guard="surprise")
            assert await fake_backend.raw().keys("*") == []

    asyncio.run(scenario())


def test_a_key_of_the_wrong_type_fails_the_change_before_any_write(fake_backend: Backend) -> None:
    async def scenario() -> None:
        raw = fake_backend.raw()
        await raw.set(fake_backend.keys.circuits, "not a set")
        async with open_store(fake_backend) as store:
            with pytest.raises(StoreUnavailableError, match="WRONGTYPE circuit_apply") as caught:
                await store.record_failure(RESOURCE, hard(), "r", fake_backend.clock.now())
            assert str(caught.value).startswith("circuit store unavailable during record_failure")
        assert await raw.exists(fake_backend.keys.circuit(RESOURCE.resource_id)) == 0
        assert await raw.get(fake_backend.keys.circuits) == "not a set"

    asyncio.run(scenario())
