"""A route whose stored data does not decode is quarantined, and every other route goes on
(issue 19, break 2): whatever command meets it stops it at `action_required` with a reason
`corrupt: <key> <field>: ...`, clears its schedule, records it in its history and on the
events stream, through the one write path. Each test runs on fakeredis (unit tier) and on
the session's real Redis (integration tier)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from actors.engine.service import RouteService
from actors.errors import CorruptRouteError, StaleFieldError
from actors.routes.commands import FireDue, RouteContext, StopRoute
from actors.routes.models import RouteSnapshot
from actors.routes.quarantine import quarantine_of, quarantine_transition, salvaged_of
from policy import Outcome
from tests.actors.conftest import Backend
from tests.actors.route_scenarios import Session, candidate, overloaded, profile, retries

POISONS = [
    ("generation", "not-a-number"),
    ("state", "sideways"),
    ("profile", "{not json"),
    ("policy_snapshot", '{"transient": '),
    ("attempt_ordinal", "-4"),
    ("profile", b"\xff\xfe not utf-8"),
]


def run(
    backend: Backend, scenario: Any, *, quarantined: list[tuple[str, str]] | None = None
) -> None:
    seen = quarantined if quarantined is not None else []

    async def main() -> None:
        async with backend.store() as store:
            service = RouteService(
                store, backend.clock, on_quarantined=lambda s, f: seen.append((s.route_id, f))
            )
            await scenario(service)

    asyncio.run(main())


async def waiting(service: RouteService, backend: Backend, *route_ids: str) -> None:
    for route_id in route_ids:
        session = Session(service, backend.clock, route_id)
        await session.start(profile(candidate("claude", transient=retries(2, 1, Outcome.STOP))))
        assert (await session.fail(overloaded())).state == "retry_wait"


@pytest.mark.parametrize(("field", "stored"), POISONS, ids=[f for f, _ in POISONS])
def test_a_corrupt_route_is_quarantined_and_the_rest_of_the_batch_goes_on(
    backend: Backend, field: str, stored: str | bytes
) -> None:
    seen: list[tuple[str, str]] = []

    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        await waiting(service, backend, "healthy", "poisoned")
        key = service.store.keys.route("poisoned")
        await client.hset(key, field, stored)
        poisoned, healthy = await service.run_many(
            [("poisoned", StopRoute(1)), ("healthy", StopRoute(1))]
        )
        assert isinstance(poisoned, RouteSnapshot), poisoned
        assert poisoned.state == "action_required"
        assert (poisoned.reason or "").startswith(f"corrupt: {key} {field}: ")
        assert isinstance(healthy, RouteSnapshot), healthy
        assert (healthy.state, healthy.reason) == ("action_required", "stopped by the user")
        # Quarantined, the route reads again; its schedule is gone; history and events say so.
        again = await service.snapshot("poisoned")
        assert (again.state, again.reason, again.deadline) == (
            "action_required",
            poisoned.reason,
            None,
        )
        assert [e.route_id for e in await service.schedules()] == []
        last = (await service.history("poisoned"))[-1]
        assert (last.decision, last.reason) == ("quarantine", poisoned.reason)
        events = [e for e in await service.store.events() if e.route_id == "poisoned"]
        assert (events[-1].cause, events[-1].state) == ("quarantine", "action_required")
        await client.aclose()

    run(backend, scenario, quarantined=seen)
    assert seen == [("poisoned", field)]


def test_a_timer_batch_with_a_corrupt_policy_snapshot_fires_every_healthy_route(
    backend: Backend,
) -> None:
    """Bad JSON in one waiting route's policy snapshot dropped its whole timer batch."""

    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        healthy = [f"healthy-{i}" for i in range(5)]
        await waiting(service, backend, *healthy, "poisoned")
        await client.hset(service.store.keys.route("poisoned"), "policy_snapshot", "{oops")
        backend.clock.advance(timedelta(seconds=30))
        outcomes = await service.run_many([(r, FireDue(1, 1)) for r in ["poisoned", *healthy]])
        states = [o.state if isinstance(o, RouteSnapshot) else o for o in outcomes]
        assert states == ["action_required"] + ["retrying"] * len(healthy)
        await client.aclose()

    run(backend, scenario)


def test_a_schedule_with_a_bad_deadline_is_its_routes_quarantine_and_the_others_fire(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        await waiting(service, backend, "healthy", "poisoned")
        schedule_key = service.store.keys.schedule("poisoned")
        await client.hset(schedule_key, "deadline", "not-a-time")
        entries, corrupt = await service.store.schedules_and_corrupt()
        assert [e.route_id for e in entries] == ["healthy"]
        assert [(c.route_id, c.key, c.field) for c in corrupt] == [
            ("poisoned", schedule_key, "deadline")
        ]
        backend.clock.advance(timedelta(seconds=30))
        fired = await service.fire_due_schedules()
        assert [(s.route_id, s.state) for s in fired] == [("healthy", "retrying")]
        poisoned = await service.snapshot("poisoned")
        assert poisoned.state == "action_required"
        assert (poisoned.reason or "").startswith(f"corrupt: {schedule_key} deadline: ")
        assert await client.exists(schedule_key) == 0
        assert await client.zscore(service.store.keys.schedules, "poisoned") is None
        await client.aclose()

    run(backend, scenario)


def test_a_quarantine_whose_corrupt_field_changed_meanwhile_writes_nothing(
    backend: Backend,
) -> None:
    """Fenced on the corrupt text itself: a repair (or another quarantine) in between wins."""

    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        await waiting(service, backend, "poisoned")
        key = service.store.keys.route("poisoned")
        await client.hset(key, "profile", "{first")
        with pytest.raises(CorruptRouteError) as caught:
            await service.snapshot("poisoned")
        found = caught.value
        planned = quarantine_transition(
            salvaged_of(found), quarantine_of(found), RouteContext(backend.clock.now())
        )
        assert planned is not None
        await client.hset(key, "profile", "{second")
        with pytest.raises(StaleFieldError):
            await service.store.apply(planned)
        assert await client.hget(key, "state") == "retry_wait"
        await client.aclose()

    run(backend, scenario)
