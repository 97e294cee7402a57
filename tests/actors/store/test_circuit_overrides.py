"""Operator overrides through the circuit store, and the circuit events stream: an
override is one fenced change that records its event in the same script; a close hands
back the release plan of the routes parked at that moment; every change of state is on
the stream, a change within one state is not.

Each test runs on fakeredis[lua] (fast) and on the session's real Redis (integration)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import cast

import pytest

from actors.errors import InvalidCircuitInputError
from actors.routes.circuit_models import CloseCircuit, OpenCircuit
from circuits import CircuitSettings, CircuitStatus
from policy.decisions import utc_iso
from tests.actors.circuit_fixtures import RESOURCE, failure, grant_of, hard, later, open_store
from tests.actors.conftest import Backend

TTL_S = 30.0


async def entries(backend: Backend) -> list[tuple[str, dict[str, str]]]:
    """The circuit events stream's (id, fields) as redis-cli shows them, oldest first."""
    raw = await backend.raw().xrange(backend.keys.circuit_events)
    return cast(list[tuple[str, dict[str, str]]], raw)  # decode_responses: text


async def stream(backend: Backend) -> list[dict[str, str]]:
    return [fields for _id, fields in await entries(backend)]


def test_an_open_override_opens_until_exactly_then_and_records_its_event(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        now = backend.clock.now()
        until = now + timedelta(minutes=10)
        async with open_store(backend) as store:
            outcome = await store.override(RESOURCE, OpenCircuit(until), now)
            assert outcome.changed
            assert outcome.release is None
            assert outcome.view.status is CircuitStatus.OPEN
            assert outcome.view.open_until == until
            assert outcome.view.state.reason == "operator"
            assert await store.view(RESOURCE) == outcome.view
            assert outcome.view.resource_id in await backend.raw().smembers(backend.keys.circuits)
        [event] = await stream(backend)
        assert event == {
            "version": "1", "event": "circuit.changed", "cause": "operator_open",
            "resource_id": RESOURCE.resource_id, "label": RESOURCE.label,
            "from_state": "closed", "state": "open",
            "open_until": utc_iso(until), "reason": "operator", "at": utc_iso(now),
        }  # fmt: skip
        [(event_id, _fields)] = await entries(backend)
        assert outcome.event_id == event_id

    asyncio.run(scenario())


def test_a_second_open_moves_open_until_and_is_recorded_though_the_state_stays_open(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        now = backend.clock.now()
        async with open_store(backend) as store:
            await store.override(RESOURCE, OpenCircuit(now + timedelta(hours=2)), now)
            shorter = await store.override(RESOURCE, OpenCircuit(now + timedelta(minutes=5)), now)
            assert shorter.view.open_until == now + timedelta(minutes=5)
            again = await store.override(RESOURCE, OpenCircuit(now + timedelta(minutes=5)), now)
            assert not again.changed
            assert again.event_id is None
            assert again.view == shorter.view
        events = await stream(backend)
        assert [(e["from_state"], e["state"], e["version"]) for e in events] == [
            ("closed", "open", "1"), ("open", "open", "2"),
        ]  # fmt: skip

    asyncio.run(scenario())


def test_a_close_override_releases_the_routes_parked_then_as_a_probe_success_would(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        now = backend.clock.now()
        async with open_store(backend) as store:
            await store.record_failure(RESOURCE, hard(), "r-1", now)
            await store.park_many(RESOURCE, ["p-1", "p-2", "p-3"], now)
            before = await store.view(RESOURCE)
            closed = await store.override(RESOURCE, CloseCircuit(), later(backend, 1))
            assert closed.changed
            assert closed.view.status is CircuitStatus.CLOSED
            assert closed.release is not None
            expected = store.release_of(["p-1", "p-2", "p-3"], backend.clock.now(), before)
            assert closed.release == expected
            assert [slot.route_id for slot in closed.release.slots] == ["p-1", "p-2", "p-3"]
        causes = [(e["cause"], e["from_state"], e["state"]) for e in await stream(backend)]
        assert causes == [
            ("record_failure", "closed", "open"),
            ("operator_close", "open", "closed"),
        ]

    asyncio.run(scenario())


def test_a_close_override_ends_a_probe_whose_late_verdict_then_changes_nothing(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with open_store(backend) as store:
            opened = await store.record_failure(RESOURCE, hard(), "r-1", backend.clock.now())
            assert opened.open_until is not None
            backend.clock.set(opened.open_until)
            grant = grant_of(
                await store.acquire_probe(RESOURCE, "prober", backend.clock.now(), TTL_S)
            )
            closed = await store.override(RESOURCE, CloseCircuit(), backend.clock.now())
            assert closed.view.status is CircuitStatus.CLOSED
            late = await store.report_probe(RESOURCE, grant.owner_token, False, later(backend, 1))
            assert not late.accepted
            assert (await store.view(RESOURCE)).status is CircuitStatus.CLOSED
        causes = [e["cause"] for e in await stream(backend)]
        assert causes == ["record_failure", "acquire_probe", "operator_close"]

    asyncio.run(scenario())


def test_closing_a_closed_circuit_with_nothing_counted_writes_nothing(backend: Backend) -> None:
    async def scenario() -> None:
        async with open_store(backend) as store:
            outcome = await store.override(RESOURCE, CloseCircuit(), backend.clock.now())
            assert not outcome.changed
            assert outcome.view.version == 0
        assert await stream(backend) == []
        assert await backend.raw().exists(backend.keys.circuit(RESOURCE.resource_id)) == 0

    asyncio.run(scenario())


def test_closing_forgets_counted_failures_and_records_it_though_the_state_stays_closed(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        now = backend.clock.now()
        async with open_store(backend) as store:
            counted = await store.record_failure(
                RESOURCE, failure("provider_overloaded"), "r-1", now
            )
            assert counted.state.recent_failures
            assert counted.status is CircuitStatus.CLOSED
            outcome = await store.override(RESOURCE, CloseCircuit(), now)
            assert outcome.changed
            assert outcome.view.state.recent_failures == ()
            assert outcome.release is not None
            assert outcome.release.slots == ()
        # the counted failure changed no state (no event); the override is always recorded
        assert [e["cause"] for e in await stream(backend)] == ["operator_close"]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "must be after now ({now})"),
        (-60, "must be after now ({now})"),
        (3601, "must be within max_open_s (3600 s) of now: at most {longest}"),
    ],
)
def test_an_open_until_not_after_now_or_beyond_max_open_s_is_refused_naming_it(
    fake_backend: Backend, seconds: int, expected: str
) -> None:
    async def scenario() -> None:
        now = fake_backend.clock.now()
        until = now + timedelta(seconds=seconds)
        settings = CircuitSettings(max_backoff_s=60, max_open_s=3600)
        async with open_store(fake_backend, settings=settings) as store:
            with pytest.raises(InvalidCircuitInputError) as caught:
                await store.override(RESOURCE, OpenCircuit(until), now)
        longest = utc_iso(now + timedelta(seconds=3600))
        detail = expected.format(now=utc_iso(now), longest=longest)
        assert str(caught.value) == f"invalid circuit until {utc_iso(until)!r}: {detail}"
        assert await stream(fake_backend) == []

    asyncio.run(scenario())


def test_a_naive_until_is_refused_naming_it(fake_backend: Backend) -> None:
    async def scenario() -> None:
        now = fake_backend.clock.now()
        naive = (now + timedelta(minutes=1)).replace(tzinfo=None)
        async with open_store(fake_backend) as store:
            with pytest.raises(InvalidCircuitInputError, match="invalid circuit until"):
                await store.override(RESOURCE, OpenCircuit(naive), now)

    asyncio.run(scenario())


def test_the_events_stream_stays_about_events_maxlen_long(fake_backend: Backend) -> None:
    async def scenario() -> None:
        now = fake_backend.clock.now()
        async with open_store(fake_backend, events_maxlen=1) as store:
            for minutes in range(1, 300):
                until = now + timedelta(minutes=minutes)
                await store.override(RESOURCE, OpenCircuit(until), now)
        assert await fake_backend.raw().xlen(fake_backend.keys.circuit_events) < 299

    asyncio.run(scenario())
