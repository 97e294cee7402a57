"""The circuit store: failures open circuits, probes close or reopen them, parked routes
are released in budgeted waves, and every change is a compare-and-set on the version.

Each test runs on fakeredis[lua] (fast) and on the session's real Redis (integration)."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from actors.errors import (
    CircuitConflictError,
    CorruptCircuitError,
    InvalidCircuitInputError,
    InvalidRouteIdError,
    StoreUnavailableError,
)
from actors.routes.circuit_models import CircuitView, resource_key
from actors.store.circuit_store import CircuitStore
from circuits import (
    CircuitSettings,
    CircuitState,
    CircuitStatus,
    DenialReason,
    ProbeDenied,
    ProbeGrant,
    ReleasePlan,
    ResourceKey,
    covering_keys,
    machine,
    plan_release,
    wave_budget,
)
from tests.actors.circuit_fixtures import (
    OTHER,
    RESOURCE,
    TTL_S,
    failure,
    grant_of,
    hard,
    later,
    open_store,
    stored_hash,
)
from tests.actors.conftest import Backend

Scenario = Callable[[CircuitStore], Awaitable[None]]


def run(backend: Backend, scenario: Scenario, **options: object) -> None:
    async def body() -> None:
        async with open_store(backend, **options) as store:
            await scenario(store)

    asyncio.run(body())


async def open_and_probe(store: CircuitStore, backend: Backend) -> str:
    """Open RESOURCE with a hard failure, let the backoff pass, take the lease."""
    opened = await store.record_failure(RESOURCE, hard(), "route-a", backend.clock.now())
    assert opened.open_until is not None
    backend.clock.set(opened.open_until)
    grant = grant_of(await store.acquire_probe(RESOURCE, "prober-1", opened.open_until, TTL_S))
    return grant.owner_token


# -- opening ------------------------------------------------------------------------------


def test_a_circuit_never_written_reads_as_closed_at_version_zero(backend: Backend) -> None:
    async def scenario(store: CircuitStore) -> None:
        view = await store.view(RESOURCE)
        assert (view.status, view.version, view.parked, view.updated_at) == (
            CircuitStatus.CLOSED, 0, 0, None,
        )  # fmt: skip
        assert view.eligible(backend.clock.now())
        assert await store.all_circuits() == []

    run(backend, scenario)


def test_a_hard_failure_opens_at_once_until_the_trusted_reset(backend: Backend) -> None:
    now = backend.clock.now()

    async def scenario(store: CircuitStore) -> None:
        view = await store.record_failure(RESOURCE, hard(reset_in_s=900), "route-a", now)
        assert view.status is CircuitStatus.OPEN
        assert view.open_until is not None
        assert view.open_until >= now + timedelta(seconds=900)
        assert view.version == 1
        assert not view.eligible(now)
        assert await store.view(RESOURCE) == view
        raw = await stored_hash(backend, RESOURCE)
        assert raw["state"] == "open"
        assert raw["open_until"].endswith("Z")
        assert float(raw["open_until_epoch"]) == view.open_until.timestamp()
        assert (raw["reason"], raw["version"], raw["label"]) == (
            "quota_limited", "1", RESOURCE.label,
        )  # fmt: skip
        assert "account-1" not in str(raw)  # only the credential's fingerprint is stored
        assert [v.resource_id for v in await store.all_circuits()] == [RESOURCE.resource_id]

    run(backend, scenario)


def test_a_hard_failure_without_a_reset_opens_for_the_first_backoff(backend: Backend) -> None:
    now = backend.clock.now()

    async def scenario(store: CircuitStore) -> None:
        view = await store.record_failure(RESOURCE, hard(code="auth_required"), "r-1", now)
        assert view.open_until == now + timedelta(seconds=60)

    run(backend, scenario)


def test_transient_failures_open_only_at_the_threshold_from_two_routes(backend: Backend) -> None:
    overloaded = failure("provider_overloaded")

    async def scenario(store: CircuitStore) -> None:
        for seconds in (0, 5, 10):
            view = await store.record_failure(
                RESOURCE, overloaded, "route-a", later(backend, seconds)
            )
            assert view.status is CircuitStatus.CLOSED
        raw = await stored_hash(backend, RESOURCE)
        assert raw["failures"] == "3"
        view = await store.record_failure(RESOURCE, overloaded, "route-b", later(backend, 1))
        assert view.status is CircuitStatus.OPEN
        assert view.state.reason == "provider_overloaded"

    run(backend, scenario)


def test_transient_failures_spread_beyond_the_window_never_open(backend: Backend) -> None:
    async def scenario(store: CircuitStore) -> None:
        for route in ("route-a", "route-b", "route-c"):
            view = await store.record_failure(
                RESOURCE, failure("model_capacity"), route, later(backend, 31)
            )
        assert view.status is CircuitStatus.CLOSED
        assert [m.route_id for m in view.state.recent_failures] == ["route-b", "route-c"]

    run(backend, scenario)


def test_failures_that_do_not_qualify_write_nothing(backend: Backend) -> None:
    async def scenario(store: CircuitStore) -> None:
        for code in ("agent_transport_lost", "context_length_exceeded", "task_error"):
            view = await store.record_failure(RESOURCE, failure(code), "r-1", backend.clock.now())
            assert view.version == 0
        assert await backend.raw().exists(store.keys.circuit(RESOURCE.resource_id)) == 0

    run(backend, scenario)


def test_views_read_many_circuits_in_the_order_asked(backend: Backend) -> None:
    async def scenario(store: CircuitStore) -> None:
        await store.record_failure(OTHER, hard(), "r-1", backend.clock.now())
        views = await store.views([RESOURCE, OTHER, RESOURCE])
        assert [v.status for v in views] == [
            CircuitStatus.CLOSED, CircuitStatus.OPEN, CircuitStatus.CLOSED,
        ]  # fmt: skip
        assert await store.views([]) == []
        blocking = await store.first_not_closed(covering_keys(RESOURCE))
        assert blocking is None
        provider_wide = RESOURCE.narrowed_to(covering_keys(RESOURCE)[0].granularity)
        await store.record_failure(provider_wide, hard(), "r-2", backend.clock.now())
        found = await store.first_not_closed(covering_keys(RESOURCE))
        assert found is not None
        assert found.resource == provider_wide

    run(backend, scenario)


# -- parking ------------------------------------------------------------------------------


def test_parking_is_refused_on_a_closed_circuit_and_kept_in_park_order(backend: Backend) -> None:
    async def scenario(store: CircuitStore) -> None:
        refused = await store.park(RESOURCE, "route-z", backend.clock.now())
        assert (refused.parked, refused.status) == (False, CircuitStatus.CLOSED)
        await store.record_failure(RESOURCE, hard(), "route-a", backend.clock.now())
        for route in ("route-c", "route-a", "route-b", "route-c"):
            outcome = await store.park(RESOURCE, route, later(backend, 1))
            assert (outcome.parked, outcome.status) == (True, CircuitStatus.OPEN)
        assert outcome.parked_count == 3
        assert await store.parked(RESOURCE) == ["route-c", "route-a", "route-b"]
        assert (await store.view(RESOURCE)).parked == 3
        assert await store.unpark(RESOURCE, "route-a")
        assert not await store.unpark(RESOURCE, "route-a")
        assert await store.parked(RESOURCE) == ["route-c", "route-b"]

    run(backend, scenario)


# -- probes -------------------------------------------------------------------------------


def test_no_lease_before_open_until_and_exactly_one_after(backend: Backend) -> None:
    async def scenario(store: CircuitStore) -> None:
        opened = await store.record_failure(RESOURCE, hard(), "route-a", backend.clock.now())
        early = await store.acquire_probe(RESOURCE, "prober-1", later(backend, 59), TTL_S)
        assert isinstance(early, ProbeDenied)
        assert (early.reason, early.retry_at) == (DenialReason.COOLING_DOWN, opened.open_until)
        grant = grant_of(await store.acquire_probe(RESOURCE, "prober-1", later(backend, 1), TTL_S))
        again = await store.acquire_probe(RESOURCE, "prober-1", later(backend, 5), TTL_S)
        assert again == grant  # the holder gets its own lease back, not extended
        other = await store.acquire_probe(RESOURCE, "prober-2", backend.clock.now(), TTL_S)
        assert isinstance(other, ProbeDenied)
        assert (other.reason, other.holder) == (DenialReason.HELD, "prober-1")
        view = await store.view(RESOURCE)
        assert (view.status, view.probe_holder) == (CircuitStatus.HALF_OPEN, "prober-1")

    run(backend, scenario)


def test_probe_failures_reopen_with_a_doubling_backoff_capped_at_an_hour(
    backend: Backend,
) -> None:
    async def scenario(store: CircuitStore) -> None:
        token = await open_and_probe(store, backend)
        backoffs = []
        for _ in range(8):
            now = later(backend, 10)
            outcome = await store.report_probe(RESOURCE, token, False, now)
            assert outcome.accepted
            assert outcome.release is None
            until = outcome.view.open_until
            assert until is not None
            backoffs.append((until - now).total_seconds())
            backend.clock.set(until)
            token = grant_of(await store.acquire_probe(RESOURCE, "p", until, TTL_S)).owner_token
        assert backoffs == [120, 240, 480, 960, 1920, 3600, 3600, 3600]

    run(backend, scenario)


def test_probe_success_closes_and_plans_release_in_budgeted_waves(backend: Backend) -> None:
    routes = [f"route-{n:02d}" for n in range(23)]

    async def scenario(store: CircuitStore) -> None:
        await store.record_failure(RESOURCE, hard(), "route-00", backend.clock.now())
        for route in routes:
            await store.park(RESOURCE, route, later(backend, 0.5))
        token = await open_and_probe(store, backend)
        closed_at = later(backend, 3)
        outcome = await store.report_probe(RESOURCE, token, True, closed_at)
        assert outcome.accepted
        assert outcome.view.status is CircuitStatus.CLOSED
        assert outcome.view.eligible(closed_at)
        plan = outcome.release
        assert plan is not None
        budget = max(1, math.floor(0.2 * len(routes)))
        assert plan.budget == wave_budget(len(routes)) == budget
        assert all(len(wave) <= budget for wave in plan.waves)
        assert sorted(slot.route_id for slot in plan.slots) == routes
        assert min(slot.release_at for slot in plan.slots) >= closed_at
        assert await store.parked(RESOURCE) == routes  # until each release unparks its route

    run(backend, scenario)


def test_the_default_release_seed_is_the_same_for_every_host_and_a_given_one_is_used(
    backend: Backend,
) -> None:
    routes = [f"r-{n}" for n in range(10)]

    async def close_with(store: CircuitStore, seed: str | None) -> tuple[ReleasePlan, str]:
        token = await open_and_probe(store, backend)
        outcome = await store.report_probe(
            RESOURCE, token, True, backend.clock.now(), jitter_seed=seed
        )
        assert outcome.release is not None
        return outcome.release, f"{RESOURCE.resource_id}:{outcome.view.state.lease_epoch}"

    async def scenario(store: CircuitStore) -> None:
        await store.record_failure(RESOURCE, hard(), "r-0", backend.clock.now())
        for route in routes:
            await store.park(RESOURCE, route, backend.clock.now())
        plan, derived = await close_with(store, None)
        assert plan == plan_release(routes, backend.clock.now(), seed=derived)
        plan, _ = await close_with(store, "chosen")
        assert plan == plan_release(routes, backend.clock.now(), seed="chosen")

    run(backend, scenario)


# -- compare-and-set ----------------------------------------------------------------------


def test_a_lost_race_is_planned_again_so_no_failure_is_lost(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = backend.clock.now()

    async def scenario(store: CircuitStore) -> None:
        reads: list[int] = []
        read = store.view

        async def read_then_rival_writes(resource: ResourceKey) -> CircuitView:
            seen = await read(resource)
            reads.append(seen.version)
            if len(reads) == 1:  # a rival writes between our read and our compare-and-set
                async with open_store(backend) as rival:
                    await rival.record_failure(RESOURCE, failure("network_unavailable"), "b", now)
            return seen

        monkeypatch.setattr(store, "view", read_then_rival_writes)
        view = await store.record_failure(RESOURCE, failure("network_unavailable"), "a", now)
        assert reads == [0, 1]
        assert view.version == 2
        assert sorted(m.route_id for m in view.state.recent_failures) == ["a", "b"]
        assert await read(RESOURCE) == view

    run(backend, scenario)


def test_a_circuit_that_keeps_changing_raises_a_conflict_and_writes_nothing_of_the_call(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = backend.clock.now()

    async def scenario(store: CircuitStore) -> None:
        read = store.view
        writes = 0

        async def read_then_rival_writes(resource: ResourceKey) -> CircuitView:
            nonlocal writes
            seen = await read(resource)
            writes += 1  # a new failure each time (the same one again would count once)
            async with open_store(backend) as rival:
                at = now + timedelta(milliseconds=writes)
                await rival.record_failure(RESOURCE, failure("model_capacity"), "rival", at)
            return seen

        monkeypatch.setattr(store, "view", read_then_rival_writes)
        with pytest.raises(CircuitConflictError) as caught:
            await store.record_failure(RESOURCE, failure("model_capacity"), "ours", now)
        assert (caught.value.operation, caught.value.attempts) == ("record_failure", 3)
        assert RESOURCE.resource_id in str(caught.value)
        stored = await read(RESOURCE)
        assert stored.status is CircuitStatus.CLOSED  # ours would have opened it
        assert [m.route_id for m in stored.state.recent_failures] == ["rival"] * 3

    run(backend, scenario, max_attempts=3)


# -- a round's failures on several circuits at once --------------------------------------

THIRD = ResourceKey(provider="google")


@dataclass(frozen=True)
class Batch:
    """A round's failures on one circuit, as actors/engine/circuit_round.Failures has them."""

    resource: ResourceKey
    failures: tuple[tuple[Any, str], ...]
    models: tuple[tuple[str | None, int], ...] | None = None


def folded(store: CircuitStore, batch: Batch, now: datetime) -> CircuitState:
    """What the pure machine makes of `batch` on a closed circuit."""
    state = CircuitState()
    for found, route_id in batch.failures:
        state = machine.record_failure(
            state, found, route_id, now, store.settings, seed=batch.resource.resource_id
        )
    return state


def counting_pipelines(store: CircuitStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    opened: list[int] = []
    pipeline = store.client.pipeline

    def counted(*args: Any, **options: Any) -> Any:
        opened.append(1)
        return pipeline(*args, **options)

    monkeypatch.setattr(store.client, "pipeline", counted)
    return opened


def test_a_rounds_failures_on_several_circuits_are_read_and_written_in_two_round_trips(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = backend.clock.now()
    batches = [
        Batch(RESOURCE, ((hard(60), "route-a"),)),
        Batch(OTHER, ((failure("network_unavailable"), "route-a"),
                      (failure("network_unavailable"), "route-b"))),
        Batch(THIRD, ((failure("context_length_exceeded"), "route-c"),)),  # counts on no circuit
    ]  # fmt: skip

    async def scenario(store: CircuitStore) -> None:
        await store.client.script_load(store.apply_script.source)  # as after a first use
        pipelines = counting_pipelines(store, monkeypatch)
        written = await store.record_failures_many(batches, now)
        assert len(pipelines) == 2  # every circuit read in one; the changed ones written in one
        views = [view for view in written if isinstance(view, CircuitView)]
        assert [v.state for v in views] == [folded(store, b, now) for b in batches]
        assert [v.version for v in views] == [1, 1, 0]  # nothing counted: nothing written
        assert views[0].status is CircuitStatus.OPEN
        assert [await store.view(b.resource) for b in batches] == views

    run(backend, scenario)


def test_a_batch_sent_to_a_server_without_the_script_loads_it_and_writes_once(
    backend: Backend,
) -> None:
    now = backend.clock.now()
    batches = [Batch(RESOURCE, ((hard(60), "a"),)), Batch(OTHER, ((hard(60), "a"),))]

    async def scenario(store: CircuitStore) -> None:
        await store.client.script_flush()
        written = await store.record_failures_many(batches, now)
        assert [getattr(view, "version", None) for view in written] == [1, 1]
        assert [(await store.view(b.resource)).version for b in batches] == [1, 1]

    run(backend, scenario)


def test_a_circuit_of_the_batch_that_lost_its_race_alone_is_planned_again(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = backend.clock.now()
    batches = [Batch(RESOURCE, ((failure("network_unavailable"), "a"),)),
               Batch(OTHER, ((failure("network_unavailable"), "a"),))]  # fmt: skip

    async def scenario(store: CircuitStore) -> None:
        reads: list[list[str]] = []
        read = store._views_apart

        async def read_then_rival_writes(resources: Any) -> Any:
            seen = await read(resources)
            reads.append([r.resource_id for r in resources])
            if len(reads) == 1:  # a rival writes OTHER between our read and our write
                async with open_store(backend) as rival:
                    await rival.record_failure(OTHER, failure("network_unavailable"), "b", now)
            return seen

        monkeypatch.setattr(store, "_views_apart", read_then_rival_writes)
        first, other = await store.record_failures_many(batches, now)
        assert reads == [[RESOURCE.resource_id, OTHER.resource_id], [OTHER.resource_id]]
        assert isinstance(first, CircuitView)
        assert isinstance(other, CircuitView)
        assert (first.version, other.version) == (1, 2)
        assert sorted(m.route_id for m in other.state.recent_failures) == ["a", "b"]

    run(backend, scenario)


def test_a_circuit_that_cannot_be_read_fails_alone_and_the_others_are_written(
    backend: Backend,
) -> None:
    now = backend.clock.now()
    batches = [Batch(RESOURCE, ((hard(60), "a"),)), Batch(OTHER, ((hard(60), "a"),)),
               Batch(THIRD, ((hard(60), "a"),))]  # fmt: skip

    async def scenario(store: CircuitStore) -> None:
        await store.client.set(store.keys.circuit(OTHER.resource_id), "not a hash")
        await store.client.hset(store.keys.circuit(THIRD.resource_id), "status", "ajar")
        first, other, third = await store.record_failures_many(batches, now)
        assert isinstance(first, CircuitView)
        assert first.status is CircuitStatus.OPEN
        assert isinstance(other, StoreUnavailableError)
        assert "WRONGTYPE" in str(other)
        assert isinstance(third, CorruptCircuitError)
        assert await store.client.get(store.keys.circuit(OTHER.resource_id)) == "not a hash"

    run(backend, scenario)


def test_a_batch_circuit_that_keeps_changing_is_a_conflict_of_its_own(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = backend.clock.now()
    batches = [Batch(RESOURCE, ((failure("model_capacity"), "ours"),)),
               Batch(OTHER, ((failure("model_capacity"), "ours"),))]  # fmt: skip

    async def scenario(store: CircuitStore) -> None:
        read = store._views_apart
        writes = 0

        async def read_then_rival_writes(resources: Any) -> Any:
            nonlocal writes
            seen = await read(resources)
            writes += 1  # a new failure on RESOURCE each time
            async with open_store(backend) as rival:
                at = now + timedelta(milliseconds=writes)
                await rival.record_failure(RESOURCE, failure("model_capacity"), "rival", at)
            return seen

        monkeypatch.setattr(store, "_views_apart", read_then_rival_writes)
        first, other = await store.record_failures_many(batches, now)
        assert isinstance(first, CircuitConflictError)
        assert (first.operation, first.attempts) == ("record_failures", 3)
        assert isinstance(other, CircuitView)
        assert other.version == 1
        stored = await store.view(RESOURCE)
        assert [m.route_id for m in stored.state.recent_failures] == ["rival"] * 3

    run(backend, scenario, max_attempts=3)


# -- bad input and a broken Redis ---------------------------------------------------------

NAIVE = datetime(2025, 3, 1, 12, 0)  # naive on purpose


@pytest.mark.parametrize(
    ("call", "field", "value"),
    [
        (lambda s, now: s.record_failure(RESOURCE, failure("quota_limited"), "a", NAIVE),
         "now", NAIVE),
        (lambda s, now: s.record_failure(
            RESOURCE, failure("quota_limited", reset_at=NAIVE), "a", now), "failure.reset_at",
         NAIVE),
        (lambda s, now: s.record_failure(
            RESOURCE, failure("rate_limited", retry_after_s=1e15), "a", now),
         "failure.retry_after_s", 1e15),
        (lambda s, now: s.acquire_probe(RESOURCE, "has space", now, 30), "holder", "has space"),
        (lambda s, now: s.acquire_probe(RESOURCE, "p", now, 0), "ttl_s", 0),
        (lambda s, now: s.acquire_probe(RESOURCE, "p", now, float("inf")), "ttl_s", math.inf),
        (lambda s, now: s.acquire_probe(RESOURCE, "p", now, True), "ttl_s", True),
        (lambda s, now: s.report_probe(RESOURCE, "", True, now), "owner token", ""),
        (lambda s, now: s.report_probe(RESOURCE, "1:p", True, now, reset_at=NAIVE),
         "reset_at", NAIVE),
        (lambda s, now: s.park(RESOURCE, "r-1", NAIVE), "now", NAIVE),
        (lambda s, now: s.view("anthropic"), "resource", "anthropic"),
    ],
)  # fmt: skip
def test_bad_arguments_raise_errors_naming_the_field_and_value_before_any_write(
    fake_backend: Backend, call: Callable[..., Awaitable[object]], field: str, value: object
) -> None:
    async def scenario(store: CircuitStore) -> None:
        with pytest.raises(InvalidCircuitInputError) as caught:
            await call(store, fake_backend.clock.now())
        assert (caught.value.field, caught.value.value) == (field, value)
        assert f"invalid circuit {field} {value!r}" in str(caught.value)
        assert await fake_backend.raw().keys("*") == []

    run(fake_backend, scenario)


@pytest.mark.parametrize(
    ("parts", "field", "value"),
    [
        ({"provider": ""}, "resource provider", ""),
        ({"provider": "openai", "model": "gpt", "credential_fingerprint": "xyz"},
         "resource credential_fingerprint", "xyz"),
        ({"provider": "openai", "model": "gpt"}, "resource",
         {"provider": "openai", "model": "gpt", "credential_fingerprint": None}),
    ],
)  # fmt: skip
def test_invalid_resource_parts_are_named(parts: dict[str, str], field: str, value: object) -> None:
    with pytest.raises(InvalidCircuitInputError) as caught:
        resource_key(**parts)
    assert (caught.value.field, caught.value.value) == (field, value)
    assert str(caught.value).startswith(f"invalid circuit {field}")


def test_a_bad_route_id_is_rejected_before_parking(fake_backend: Backend) -> None:
    async def scenario(store: CircuitStore) -> None:
        with pytest.raises(InvalidRouteIdError, match="route id 'no spaces'"):
            await store.park(RESOURCE, "no spaces", fake_backend.clock.now())

    run(fake_backend, scenario)


def test_an_unreachable_redis_is_a_store_unavailable_error() -> None:
    async def scenario() -> None:
        async with CircuitStore.connect("redis://127.0.0.1:1/0", timeout_s=2) as store:
            with pytest.raises(StoreUnavailableError, match="circuit store unavailable during"):
                await store.view(RESOURCE)

    asyncio.run(scenario())


# -- the store agrees with the pure machine -----------------------------------------------

CODES = ("quota_limited", "rate_limited", "provider_overloaded", "network_unavailable",
         "agent_transport_lost")  # fmt: skip


@pytest.mark.parametrize("seed", range(5))
def test_a_random_run_stores_exactly_the_states_the_pure_machine_computes(
    fake_backend: Backend, seed: int
) -> None:
    chooser = random.Random(seed)
    settings = CircuitSettings()
    ttl = timedelta(seconds=TTL_S)

    async def scenario(store: CircuitStore) -> None:
        expected = CircuitState()
        tokens: list[str] = []
        for _ in range(120):
            now = later(fake_backend, chooser.choice([0, 1, 7, 31, 65, 200]))
            step = chooser.choice(["fail", "fail", "acquire", "report", "abandon"])
            if step == "fail":
                code, route = chooser.choice(CODES), chooser.choice(["a", "b", "c"])
                hint = chooser.choice([None, 30.0, 900.0])
                found = failure(code, retry_after_s=hint)
                expected = machine.record_failure(
                    expected, found, route, now, settings, seed=RESOURCE.resource_id
                )
                await store.record_failure(RESOURCE, found, route, now)
            elif step == "acquire":
                expected, result = machine.acquire_probe(expected, "p", now, ttl)
                assert await store.acquire_probe(RESOURCE, "p", now, TTL_S) == result
                if isinstance(result, ProbeGrant):
                    tokens.append(result.owner_token)
            elif tokens:
                token, ok = chooser.choice(tokens), chooser.random() < 0.5
                if step == "report":
                    expected = machine.record_probe_result(
                        expected, token, ok, now, settings, seed=RESOURCE.resource_id
                    )
                    await store.report_probe(RESOURCE, token, ok, now)
                else:
                    expected = machine.abandon_probe(expected, token, now)
                    await store.abandon_probe(RESOURCE, token, now)
            assert (await store.view(RESOURCE)).state == expected

    run(fake_backend, scenario)


def test_a_corrupt_failure_mark_in_redis_fails_its_circuit_alone_naming_the_field(
    backend: Backend,
) -> None:
    """A mark edited by hand in the stored hash (an empty route id) is refused when the
    store reads the circuit back, naming the field; the other circuits are written."""
    now = backend.clock.now()
    batches = [Batch(RESOURCE, ((hard(60), "a"),)), Batch(OTHER, ((hard(60), "a"),))]

    async def scenario(store: CircuitStore) -> None:
        await store.record_failure(OTHER, failure("network_unavailable"), "b", now)
        key = store.keys.circuit(OTHER.resource_id)
        marks = '[{"at":"2026-12-08T00:59:00Z","route_id":"","code":"provider_overloaded"}]'
        await store.client.hset(key, "recent_failures", marks)
        first, other = await store.record_failures_many(batches, now)
        assert isinstance(first, CircuitView)
        assert first.status is CircuitStatus.OPEN
        assert isinstance(other, CorruptCircuitError)
        assert "route_id" in str(other)
        assert await store.client.hget(key, "recent_failures") == marks

    run(backend, scenario)
