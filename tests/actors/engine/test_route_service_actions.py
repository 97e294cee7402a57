"""Route manual actions, timers, expiry and profile edits through RouteService and
Redis. Each test runs on fakeredis (unit tier) and on the session's real Redis
(integration tier), with an injected ManualClock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from actors.engine.service import RouteService
from actors.errors import InvalidStateError, StaleGenerationError
from actors.keys import AttemptFence
from actors.routes.models import RouteSnapshot
from policy import Outcome
from tests.actors.conftest import Backend, raw_state
from tests.actors.route_builders import in_seconds
from tests.actors.route_drivers import run_service
from tests.actors.route_scenarios import (
    Session,
    candidate,
    out_of_credits,
    overloaded,
    profile,
    retries,
    unknown_error,
    usage_limit,
)


def test_a_stale_generation_is_rejected_with_no_effect(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        session = Session(service, backend.clock, "session-1")
        await session.start(profile(candidate("claude"), candidate("codex")))
        await session.fail(overloaded())  # skip: generation 2
        before = await raw_state(client, service.store.keys, "session-1")
        stale: list[Callable[[], Awaitable[RouteSnapshot]]] = [
            lambda: service.report_failure(
                "session-1", 1, overloaded(), None, caller="kanban", invocation_id="inv"
            ),
            lambda: service.report_success("session-1", 1),
            lambda: service.stop("session-1", 1),
            lambda: service.close("session-1", 3),
        ]
        for call in stale:
            with pytest.raises(StaleGenerationError) as caught:
                await call()
            assert caught.value.actual == 2
        assert await raw_state(client, service.store.keys, "session-1") == before
        await client.aclose()

    run_service(backend, scenario)


def test_a_duplicate_or_late_timer_is_a_no_op(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        session = Session(service, backend.clock, "session-1")
        await session.start()
        await session.fail(overloaded())
        fired = await session.fire()
        after_fire = await raw_state(client, service.store.keys, "session-1")
        assert await service.fire_due(AttemptFence("session-1", 1, 1)) == fired, "duplicate"
        second = await session.fail(overloaded())  # attempt 2 pending, due at +10 s
        backend.clock.advance(timedelta(seconds=30))
        waiting = await raw_state(client, service.store.keys, "session-1")
        assert await service.fire_due(AttemptFence("session-1", 1, 1)) == second, (
            "late, for attempt 1"
        )
        assert await service.fire_due(AttemptFence("session-1", 0, 2)) == second, (
            "another generation"
        )
        assert await raw_state(client, service.store.keys, "session-1") == waiting
        assert after_fire != waiting
        await client.aclose()

    run_service(backend, scenario)


def test_resume_and_start_fresh_leave_action_required(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, "session-1")
        await session.start()
        await session.fail(out_of_credits())
        resumed = await service.resume("session-1", 1)
        assert (resumed.state, resumed.generation, resumed.candidate_id) == (
            "active", 1, "claude"
        )  # fmt: skip
        await session.fail(unknown_error())
        fresh = await service.start_fresh("session-1", 1)
        assert (fresh.state, fresh.generation, fresh.candidate_id) == ("active", 2, "claude")
        assert (fresh.code, fresh.cycle.retries, fresh.attempt_ordinal) == (None, (), 0)
        with pytest.raises(InvalidStateError):
            await service.resume("session-1", 2)  # active: nothing to resume
        assert await session.decisions() == ["start", "stop", "resume", "stop", "start_fresh"]

    run_service(backend, scenario)


def test_close_is_terminal_and_the_closed_route_expires(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        session = Session(service, backend.clock, "session-1")
        await session.start()
        await session.fail(overloaded())
        closed = await service.close("session-1", 1)
        assert (closed.state, closed.deadline) == ("closed", None)
        assert await service.schedules() == []
        assert await service.close("session-1", 1) == closed, "closing again does nothing"
        for action in (service.retry_now, service.stop, service.resume, service.start_fresh):
            with pytest.raises(InvalidStateError):
                await action("session-1", 1)
        ttl = await client.ttl(service.store.keys.route("session-1"))
        assert 0 < ttl <= service.settings.closed_ttl_s
        await client.aclose()

    run_service(backend, scenario)


def test_a_profile_edit_affects_the_next_decision_never_the_pending_schedule(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, "session-1")
        await session.start()
        waiting = await session.fail(overloaded())
        old_policy = waiting.policy_snapshot
        slower = profile(candidate("claude", transient=retries(3, 20, Outcome.STOP)))
        edited = await service.update_profile("session-1", slower)
        assert (edited.deadline, edited.policy_snapshot) == (waiting.deadline, old_policy)
        [entry] = await service.schedules()
        assert entry.deadline == in_seconds(5)
        await session.fire()
        second = await session.fail(overloaded())
        assert second.deadline == backend.clock.now() + timedelta(seconds=40)  # 20 * 2**1
        history = await service.history("session-1")
        assert history[1].policy_snapshot == old_policy
        assert history[-1].policy_snapshot == slower.candidates[0].policy.model_dump(mode="json")

    run_service(backend, scenario)


def test_utility_routes_expire_and_keep_their_invocation(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        keys = service.store.keys
        session = Session(service, backend.clock, "utility-1", "utility")
        await session.start()
        assert 0 < await client.ttl(keys.route("utility-1")) <= service.settings.utility_ttl_s
        waiting = await session.fail(usage_limit(in_seconds(60)))
        assert waiting.state == "waiting_for_reset"
        assert await client.ttl(keys.route("utility-1")) > service.settings.utility_ttl_s
        await session.fire()
        stale = await service.report_failure(
            "utility-1", 1, overloaded(), None, caller="utility", invocation_id="inv-other"
        )
        assert stale.state == "action_required"
        assert stale.reason is not None
        assert stale.reason.startswith("stale failure")
        assert 0 < await client.ttl(keys.route("utility-1")) <= service.settings.utility_ttl_s
        await client.aclose()

    run_service(backend, scenario)
