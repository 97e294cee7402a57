"""The profile store through the real runtime (Ray route hosts, real Redis): profiles
created and edited with `runtime.profiles`, a route started with `profile_id=` on its
host, following an edit at its next decision with each version in its history, and
stopping once its profile is deleted. No timer is waited for: the retries are minutes
away and `retry_now` moves the route on."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from actors.hosting.runtime import RecoveryRuntime, RouteHandle
from actors.keys import KeySpace
from actors.routes.models import RouteSnapshot
from actors.routes.profile_errors import ProfileNotFoundError, StaleProfileVersionError
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.route_scenarios import (
    candidate,
    immediately,
    overloaded,
    profile,
    retries,
    safe_turn,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

FLEET = "fleet"


def slow_retries() -> DynamicProfile:
    return profile(candidate("claude", transient=retries(3, 600, Outcome.STOP)), candidate("codex"))


def stopping() -> DynamicProfile:
    return profile(candidate("claude", transient=immediately(Outcome.STOP)), candidate("codex"))


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = RecoveryRuntime(
        redis_url=redis_url, key_prefix=f"recovery-prof-{uuid.uuid4().hex[:12]}", host_count=1
    ).start()
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(started.key_prefix))


async def fail(route: RouteHandle, generation: int) -> RouteSnapshot:
    return await route.report_failure(
        generation, overloaded(), safe_turn(), caller="kanban", invocation_id="turn-1"
    )


def test_a_route_started_by_profile_id_follows_edits_through_the_runtime(
    runtime: RecoveryRuntime,
) -> None:
    async def scenario() -> None:
        created = await runtime.profiles.create(FLEET, slow_retries(), principal="alice")
        route = runtime.route("session-1")
        started = await route.start(profile_id=FLEET, caller="kanban", invocation_id="turn-1")
        assert (started.state, started.profile_id, started.profile_version) == (
            "active", FLEET, 1,
        )  # fmt: skip
        waiting = await fail(route, 1)
        assert (waiting.state, waiting.profile_version) == ("retry_wait", 1)
        edited = await runtime.profiles.update(FLEET, stopping(), expected_version=1)
        with pytest.raises(StaleProfileVersionError):
            await runtime.profiles.update(FLEET, slow_retries(), expected_version=created.version)
        assert await runtime.profiles.get(FLEET) == edited
        assert (await route.retry_now(1)).state == "retrying"
        stopped = await fail(route, 1)
        assert (stopped.state, stopped.profile_version) == ("action_required", 2)
        assert [(r.decision, r.profile_version) for r in await route.history()] == [
            ("start", 1), ("retry", 1), ("retry_now", 1), ("stop", 2),
        ]  # fmt: skip
        page = await runtime.profiles.list()
        assert [(p.profile_id, p.version) for p in page.profiles] == [(FLEET, 2)]

    asyncio.run(scenario())


def test_a_route_whose_profile_is_deleted_stops_at_its_next_decision_through_the_runtime(
    runtime: RecoveryRuntime,
) -> None:
    async def scenario() -> None:
        await runtime.profiles.create(FLEET, slow_retries())
        route = runtime.route("session-2")
        await route.start(profile_id=FLEET, caller="kanban", invocation_id="turn-1")
        await runtime.profiles.delete(FLEET, expected_version=1)
        stopped = await fail(route, 1)
        assert (stopped.state, stopped.next_step) == ("action_required", "manual")
        assert "profile 'fleet' was deleted" in (stopped.reason or "")
        with pytest.raises(ProfileNotFoundError):
            await runtime.route("session-3").start(
                profile_id=FLEET, caller="kanban", invocation_id="turn-1"
            )

    asyncio.run(scenario())
