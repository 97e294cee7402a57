"""A route whose stored profile is corrupt, through RouteService with circuits on
fakeredis: a failure report stops that route (its round goes on), a skip names the route
in CorruptProfileError, and a profile that is not JSON fails the read naming the route,
key and field."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from actors.engine.circuit_effects import CircuitEffects
from actors.engine.service import RouteService
from actors.errors import CorruptProfileError, CorruptRouteError
from actors.routes.circuit_board import CircuitBinding
from actors.routes.commands import ReportFailure, SkipNow, Start
from actors.routes.models import RouteSnapshot
from actors.store.circuit_store import CircuitStore
from tests.actors.conftest import Backend
from tests.actors.route_scenarios import overloaded, safe_turn, seed_profile

BINDING = CircuitBinding(installation_key=b"corrupt-profile-test")
INVALID_PROFILE = '{"candidates": "claude"}'


def run_with_circuits(
    backend: Backend, scenario: Callable[[RouteService, Backend], Awaitable[None]]
) -> None:
    async def main() -> None:
        async with backend.store() as store:
            circuits = CircuitStore(backend.raw(), keys=backend.keys, owns_client=True)
            async with circuits:
                effects = CircuitEffects(circuits, BINDING)
                await scenario(RouteService(store, backend.clock, circuits=effects), backend)

    asyncio.run(main())


async def start(service: RouteService, *route_ids: str) -> None:
    started = await service.run_many(
        [(r, Start(seed_profile(), "kanban", f"inv-{r}")) for r in route_ids]
    )
    assert all(isinstance(s, RouteSnapshot) for s in started), started


async def store_profile(backend: Backend, route_id: str, text: str) -> None:
    await backend.raw().hset(backend.keys.route(route_id), "profile", text)


def failure(route_id: str) -> tuple[str, ReportFailure]:
    return route_id, ReportFailure(1, overloaded(), safe_turn(), "kanban", f"inv-{route_id}")


def test_a_failure_on_a_route_with_an_invalid_profile_stops_it_and_spares_its_round(
    fake_backend: Backend,
) -> None:
    async def scenario(service: RouteService, backend: Backend) -> None:
        await start(service, "corrupt", "sound")
        await store_profile(backend, "corrupt", INVALID_PROFILE)
        corrupt, sound = await service.run_many([failure("corrupt"), failure("sound")])
        assert isinstance(corrupt, RouteSnapshot), corrupt
        assert corrupt.state == "action_required"
        assert (corrupt.reason or "").startswith("policy configuration error, fix the profile")
        assert isinstance(sound, RouteSnapshot), sound
        assert sound.state == "retry_wait"

    run_with_circuits(fake_backend, scenario)


def test_a_skip_on_a_route_with_an_invalid_profile_raises_corrupt_profile_error(
    fake_backend: Backend,
) -> None:
    async def scenario(service: RouteService, backend: Backend) -> None:
        await start(service, "corrupt")
        (waiting,) = await service.run_many([failure("corrupt")])
        assert isinstance(waiting, RouteSnapshot)
        assert waiting.state == "retry_wait"
        await store_profile(backend, "corrupt", INVALID_PROFILE)
        (outcome,) = await service.run_many([("corrupt", SkipNow(waiting.generation))])
        assert isinstance(outcome, CorruptProfileError), outcome
        assert outcome.route_id == "corrupt"

    run_with_circuits(fake_backend, scenario)


def test_reading_a_route_whose_profile_is_not_json_raises_corrupt_route_error(
    fake_backend: Backend,
) -> None:
    """A read never writes: it names the route, key and field; a command quarantines."""

    async def scenario(service: RouteService, backend: Backend) -> None:
        await start(service, "corrupt")
        await store_profile(backend, "corrupt", "not json")
        with pytest.raises(CorruptRouteError) as caught:
            await service.snapshot("corrupt")
        assert caught.value.route_id == "corrupt"
        assert (caught.value.key, caught.value.field) == (backend.keys.route("corrupt"), "profile")
        assert caught.value.detail.startswith("not JSON: ")

    run_with_circuits(fake_backend, scenario)
