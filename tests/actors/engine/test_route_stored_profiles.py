"""Routes started by profile id through RouteService and the profile store, on fakeredis
(unit tier) and the session's real Redis (integration tier): the round reads the stored
profile before planning, a route follows an edit at its next decision and its history
records each version, and a deleted or corrupt stored profile stops the route (with
circuits too) — never a dispatch from it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import pytest

from actors.engine.circuit_effects import CircuitEffects
from actors.engine.service import RouteService
from actors.routes.circuit_board import CircuitBinding
from actors.routes.commands import ReportFailure, Start
from actors.routes.models import RouteSnapshot
from actors.routes.profile_board import ProfileRead
from actors.routes.profile_errors import ProfileNotFoundError
from actors.routes.profiles import profile_json
from actors.store.circuit_store import CircuitStore
from actors.store.profile_store import ProfileStore
from policy import DynamicProfile, Outcome
from tests.actors.conftest import Backend
from tests.actors.route_scenarios import (
    Session,
    candidate,
    immediately,
    overloaded,
    profile,
    safe_turn,
    seed_profile,
)

FLEET = "fleet"
BINDING = CircuitBinding(installation_key=b"stored-profile-test")


def stopping() -> DynamicProfile:
    return profile(candidate("claude", transient=immediately(Outcome.STOP)), candidate("codex"))


Scenario = Callable[[RouteService, ProfileStore], Awaitable[None]]


def run(backend: Backend, scenario: Scenario, *, circuits: bool = False) -> None:
    async def main() -> None:
        async with backend.store() as store:
            effects = None
            if circuits:
                circuit_store = CircuitStore(backend.raw(), keys=backend.keys, owns_client=True)
                effects = CircuitEffects(circuit_store, BINDING)
            service = RouteService(store, backend.clock, circuits=effects)
            await scenario(service, service.profiles)
            if effects is not None:
                await effects.circuits.aclose()

    asyncio.run(main())


async def start_by_id(service: RouteService, route_id: str = "session-1") -> RouteSnapshot:
    return await service.start(
        route_id, caller="kanban", invocation_id=f"inv-{route_id}", profile_id=FLEET
    )


def test_a_route_started_by_id_follows_an_edit_at_its_next_decision(backend: Backend) -> None:
    async def scenario(service: RouteService, profiles: ProfileStore) -> None:
        await profiles.create(FLEET, seed_profile())
        session = Session(service, backend.clock, "session-1")
        started = await start_by_id(service)
        assert (started.profile_id, started.profile_version) == (FLEET, 1)
        waiting = await session.fail(overloaded())
        assert (waiting.state, waiting.profile_version) == ("retry_wait", 1)
        edited = await profiles.update(FLEET, stopping(), expected_version=1)
        assert edited.version == 2
        assert (await session.fire()).state == "retrying"
        stopped = await session.fail(overloaded())
        assert (stopped.state, stopped.profile_version) == ("action_required", 2)
        assert stopped.profile == profile_json(edited.document)
        history = await service.history("session-1")
        assert [(r.decision, r.profile_id, r.profile_version) for r in history] == [
            ("start", FLEET, 1), ("retry", FLEET, 1), ("deadline_reached", FLEET, 1),
            ("stop", FLEET, 2),
        ]  # fmt: skip
        raw = await backend.raw().hgetall(backend.keys.route("session-1"))
        assert (raw["profile_id"], raw["profile_version"]) == (FLEET, "2")

    run(backend, scenario)


def test_corrupt_stored_json_stops_the_route_at_its_next_decision_and_spares_the_round(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService, profiles: ProfileStore) -> None:
        await profiles.create(FLEET, seed_profile())
        await start_by_id(service, "following")
        await service.start("inline", seed_profile(), caller="kanban", invocation_id="inv-inline")
        await backend.raw().hset(backend.keys.profile(FLEET), "document", '{"candidates": [')
        reports = [
            (r, ReportFailure(1, overloaded(), safe_turn(), "kanban", f"inv-{r}"))
            for r in ("following", "inline")
        ]
        following, inline = await service.run_many(reports)
        assert isinstance(following, RouteSnapshot), following
        assert following.state == "action_required"
        assert (following.reason or "").startswith(
            "policy configuration error, fix the profile: stored profile 'fleet' version 1 "
            "is not a valid v1 profile (its document is not JSON"
        )
        assert isinstance(inline, RouteSnapshot), inline
        assert inline.state == "retry_wait"

    run(backend, scenario)


def test_a_due_retry_of_a_deleted_profile_stops_instead_of_dispatching(backend: Backend) -> None:
    async def scenario(service: RouteService, profiles: ProfileStore) -> None:
        await profiles.create(FLEET, seed_profile())
        await start_by_id(service)
        waiting = await Session(service, backend.clock, "session-1").fail(overloaded())
        await profiles.delete(FLEET, expected_version=1)
        assert waiting.deadline is not None
        backend.clock.set(waiting.deadline)
        (stopped,) = await service.fire_due_schedules()
        assert (stopped.state, stopped.next_step) == ("action_required", "manual")
        assert "profile 'fleet' was deleted (at version 1)" in (stopped.reason or "")
        assert await service.schedules() == []

    run(backend, scenario)


def test_a_start_by_id_of_a_missing_profile_is_refused_and_writes_nothing(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService, profiles: ProfileStore) -> None:
        with pytest.raises(ProfileNotFoundError):
            await start_by_id(service)
        assert await backend.raw().exists(backend.keys.route("session-1")) == 0
        (outcome,) = await service.run_many(
            [("session-2", Start(None, "kanban", "inv-2", profile_id=FLEET))]
        )
        assert isinstance(outcome, ProfileNotFoundError)

    run(backend, scenario)


def test_with_circuits_a_failure_skips_to_a_candidate_only_the_current_version_has(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService, profiles: ProfileStore) -> None:
        await profiles.create(FLEET, profile(candidate("claude"), candidate("codex")))
        await start_by_id(service)
        three = profile(candidate("claude"), candidate("gemini"), candidate("codex"))
        await profiles.update(FLEET, three, expected_version=1)
        switched = await Session(service, backend.clock, "session-1").fail(overloaded())
        assert (switched.state, switched.candidate_id, switched.profile_version) == (
            "active", "gemini", 2,
        )  # fmt: skip

    run(backend, scenario, circuits=True)


def test_many_routes_on_one_profile_in_one_batch_read_it_once_at_its_current_version(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService, profiles: ProfileStore) -> None:
        await profiles.create(FLEET, seed_profile())
        route_ids = [f"session-{i}" for i in range(20)]
        starts = [(r, Start(None, "kanban", f"inv-{r}", profile_id=FLEET)) for r in route_ids]
        await service.run_many(starts)
        await profiles.update(FLEET, stopping(), expected_version=1)
        reads: list[list[str]] = []
        revisions = profiles.revisions

        async def counted(profile_ids: Iterable[str], **options: str) -> dict[str, ProfileRead]:
            reads.append(sorted(profile_ids))
            return await revisions(profile_ids, **options)

        profiles.revisions = counted  # type: ignore[method-assign]  # counting the reads
        reports = [
            (r, ReportFailure(1, overloaded(), safe_turn(), "kanban", f"inv-{r}"))
            for r in route_ids
        ]
        outcomes = await service.run_many(reports)
        assert {(o.state, o.profile_version) for o in outcomes if isinstance(o, RouteSnapshot)} == {
            ("action_required", 2)
        }
        assert len(outcomes) == len(route_ids)
        assert reads == [[FLEET]]  # one pipeline for the whole round

    run(backend, scenario, circuits=True)


def test_a_route_storing_a_profile_id_that_names_nothing_is_quarantined(backend: Backend) -> None:
    async def scenario(service: RouteService, profiles: ProfileStore) -> None:
        await profiles.create(FLEET, seed_profile())
        await start_by_id(service)
        await backend.raw().hset(backend.keys.route("session-1"), "profile_id", "no such id!")
        (stopped,) = await service.run_many(
            [("session-1", ReportFailure(1, overloaded(), safe_turn(), "kanban", "inv-session-1"))]
        )
        assert isinstance(stopped, RouteSnapshot), stopped
        assert stopped.state == "action_required"
        assert (stopped.reason or "").startswith(
            f"corrupt: {backend.keys.route('session-1')} profile_id:"
        )

    run(backend, scenario)
