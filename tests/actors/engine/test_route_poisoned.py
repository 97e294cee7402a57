"""One route whose stored data cannot be read never fails the others of its batch: it gets
its own error, every other item is applied (the first step of issue 19's quarantine). Each
test runs on fakeredis (unit tier) and on the session's real Redis (integration tier)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actors.engine.service import RouteService
from actors.errors import CorruptProfileError, StoreUnavailableError
from actors.routes.commands import StopRoute
from actors.routes.models import RouteSnapshot
from policy import Outcome
from tests.actors.conftest import Backend
from tests.actors.route_drivers import run_service
from tests.actors.route_scenarios import Session, candidate, overloaded, profile, retries


@pytest.mark.parametrize(
    ("field", "stored", "error"),
    [
        ("generation", "not-a-number", StoreUnavailableError),
        ("profile", "{not json", CorruptProfileError),
    ],
)
def test_a_poisoned_route_is_its_own_error_and_the_rest_of_the_batch_goes_on(
    backend: Backend, field: str, stored: str, error: type[Exception]
) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        for route_id in ("healthy", "poisoned"):
            await Session(service, backend.clock, route_id).start(
                profile(candidate("claude", transient=retries(2, 1, Outcome.STOP)))
            )
        await client.hset(service.store.keys.route("poisoned"), field, stored)
        outcomes = await service.run_many([("poisoned", StopRoute(1)), ("healthy", StopRoute(1))])
        assert isinstance(outcomes[0], error), outcomes[0]
        assert isinstance(outcomes[1], RouteSnapshot), outcomes[1]
        assert outcomes[1].state == "action_required"
        assert (await service.snapshot("healthy")).state == "action_required"
        await client.aclose()

    run_service(backend, scenario)


def test_a_schedule_hash_that_cannot_be_read_never_hides_the_others(backend: Backend) -> None:
    """A bad deadline in one schedule hash made every host's rehydration (which reads all
    of its schedules) fail for good; now that one entry is skipped with a warning."""

    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        for route_id in ("healthy", "poisoned"):
            session = Session(service, backend.clock, route_id)
            await session.start(profile(candidate("claude", transient=retries(2, 1, Outcome.STOP))))
            await session.fail(overloaded())
        await client.hset(service.store.keys.schedule("poisoned"), "deadline", "not-a-time")
        pending = await service.store.schedules()
        assert [entry.route_id for entry in pending] == ["healthy"]
        backend.clock.advance(timedelta(seconds=30))
        due = await service.store.due_schedules(backend.clock.now(), limit=10)
        assert [entry.route_id for entry in due] == ["healthy"]
        await client.aclose()

    run_service(backend, scenario)
