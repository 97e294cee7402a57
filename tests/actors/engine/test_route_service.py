"""The route seed scenarios end to end through RouteService and Redis. Each test runs on
fakeredis (unit tier) and on the session's real Redis (integration tier), under its own
key prefix, with an injected ManualClock: timers are fired by advancing it, never by
sleeping."""

from __future__ import annotations

from datetime import timedelta

from actors.engine.service import RouteService
from actors.routes.models import RouteSnapshot
from actors.routes.profiles import ConcreteProfile
from policy import Outcome
from tests.actors.conftest import Backend
from tests.actors.route_builders import T0, in_seconds
from tests.actors.route_drivers import run_service
from tests.actors.route_scenarios import (
    Session,
    candidate,
    out_of_credits,
    overloaded,
    profile,
    retries,
    tool_turn,
    transport_lost,
    unknown_error,
    usage_limit,
)


def test_three_retries_at_5_10_and_20_s_then_the_exhausted_outcome(backend: Backend) -> None:
    clock = backend.clock

    async def scenario(service: RouteService) -> None:
        session = Session(service, clock, "session-1")
        await session.start()
        for ordinal, delay in ((1, 5), (2, 10), (3, 20)):
            waiting = await session.fail(overloaded())
            assert (waiting.state, waiting.generation) == ("retry_wait", 1)
            assert (waiting.retry_ordinal, waiting.retry_max) == (ordinal, 3)
            assert waiting.deadline == clock.now() + timedelta(seconds=delay)
            [entry] = await service.schedules()
            assert (entry.route_id, entry.generation, entry.ordinal) == ("session-1", 1, ordinal)
            assert (entry.deadline, entry.pending_outcome) == (waiting.deadline, "retry")
            clock.advance(timedelta(seconds=delay - 1))
            assert await service.fire_due_schedules() == [], "not due yet"
            clock.set(waiting.deadline)
            [fired] = await service.fire_due_schedules()
            assert (fired.state, fired.deadline) == ("retrying", None)
            assert await service.schedules() == []
        exhausted = await session.fail(overloaded())
        assert (exhausted.state, exhausted.generation) == ("active", 2)
        assert (exhausted.candidate_id, exhausted.code) == ("codex", "provider_overloaded")
        assert await service.snapshot("session-1") == exhausted
        assert await session.decisions() == [
            "start", *["retry", "deadline_reached"] * 3, "skip"
        ]  # fmt: skip
        retried = [e for e in await service.store.events() if e.decision == "retry"]
        assert [(e.attempt_ordinal, e.retry_ordinal, e.retry_max) for e in retried] == [
            (1, 1, 3), (2, 2, 3), (3, 3, 3)
        ]  # fmt: skip

    run_service(backend, scenario)


def test_a_trusted_reset_a_minute_away_is_waited_once_then_not_again(backend: Backend) -> None:
    clock = backend.clock

    async def scenario(service: RouteService) -> None:
        session = Session(service, clock, "session-1")
        await session.start()
        waiting = await session.fail(usage_limit(in_seconds(60)))
        assert (waiting.state, waiting.deadline) == ("waiting_for_reset", in_seconds(60))
        assert (waiting.code, waiting.error_class, waiting.pending_outcome) == (
            "quota_limited", "hard", "retry_after_reset"
        )  # fmt: skip
        [entry] = await service.schedules()
        assert (entry.state, entry.deadline, entry.ordinal) == (
            "waiting_for_reset", in_seconds(60), 1
        )  # fmt: skip
        retried = await session.fire()
        assert (retried.state, retried.candidate_id, retried.generation) == (
            "retrying", "claude", 1
        )  # fmt: skip
        # The post-wait attempt fails with a fresh reset a minute on: no second wait.
        stopped = await session.fail(usage_limit(clock.now() + timedelta(seconds=60)))
        assert (stopped.state, stopped.deadline) == ("action_required", None)
        assert stopped.reason is not None
        assert "already used in this cycle" in stopped.reason
        assert await session.decisions() == [
            "start", "wait_for_reset", "deadline_reached", "stop"
        ]  # fmt: skip

    run_service(backend, scenario)


def test_a_reset_six_hours_away_is_not_waited_for(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, "session-1")
        await session.start()
        stopped = await session.fail(usage_limit(T0 + timedelta(hours=6)))
        assert (stopped.state, stopped.deadline, stopped.candidate_id) == (
            "action_required", None, "claude"
        )  # fmt: skip
        assert stopped.reason is not None
        assert "is beyond the 5 min maximum wait, so it is not waited for" in stopped.reason
        assert await service.schedules() == []

    run_service(backend, scenario)


def test_skip_moves_the_same_logical_route_to_the_next_candidate(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, "session-1")
        chain = profile(candidate("claude"), candidate("codex"), candidate("gemini"))
        await session.start(chain)
        on_codex = await session.fail(overloaded())
        on_gemini = await session.fail(overloaded())
        assert [(s.candidate_id, s.generation, s.state) for s in (on_codex, on_gemini)] == [
            ("codex", 2, "active"), ("gemini", 3, "active")
        ]  # fmt: skip
        assert on_gemini.route_id == "session-1"
        assert on_gemini.cycle.skipped == ("claude", "codex")
        events = await service.store.events()
        assert [(e.state, e.generation) for e in events] == [
            ("active", 1), ("switching", 2), ("active", 2), ("switching", 3), ("active", 3)
        ]  # fmt: skip

    run_service(backend, scenario)


def test_exhausted_credits_under_a_hard_stop_policy_stop_without_another_provider(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, "session-1")
        await session.start()
        stopped = await session.fail(out_of_credits())
        assert (stopped.state, stopped.candidate_id, stopped.generation) == (
            "action_required", "claude", 1
        )  # fmt: skip
        assert (stopped.code, stopped.error_class, stopped.pending_outcome) == (
            "quota_limited", "hard", "stop"
        )  # fmt: skip
        assert await session.decisions() == ["start", "stop"]

    run_service(backend, scenario)


def test_an_unknown_error_stops_and_keeps_only_a_safe_excerpt(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, "session-1")
        await session.start()
        stopped = await session.fail(unknown_error())
        assert (stopped.state, stopped.code, stopped.error_class) == (
            "action_required", "unclassified", "unclassified"
        )  # fmt: skip
        record = (await service.history("session-1"))[-1]
        assert (record.decision, record.rule) == ("stop", "catalogue.no_match.v1")
        assert record.safe_excerpt is not None
        assert "frobnicator jammed" in record.safe_excerpt

    run_service(backend, scenario)


def test_tool_activity_stops_even_when_the_policy_would_retry_or_skip(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService) -> None:
        retrying = Session(service, backend.clock, "would-retry")
        await retrying.start()  # transient: 3 retries
        skipping = Session(service, backend.clock, "would-skip")
        await skipping.start(profile(candidate("claude"), candidate("codex")))  # skip at once
        for session in (retrying, skipping):
            stopped = await session.fail(overloaded(), tool_turn())
            assert (stopped.state, stopped.candidate_id, stopped.generation) == (
                "action_required", "claude", 1
            )  # fmt: skip
            assert stopped.reason is not None
            assert "a tool call started" in stopped.reason
        assert await service.schedules() == []

    run_service(backend, scenario)


def test_agent_transport_lost_retries_the_same_candidate_but_never_skips(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, "session-1")
        one_retry = candidate("claude", transient=retries(1, 5, Outcome.SKIP))
        await session.start(profile(one_retry, candidate("codex")))
        assert (await session.fail(transport_lost())).state == "retry_wait"
        await session.fire()
        stopped = await session.fail(transport_lost())
        assert (stopped.state, stopped.candidate_id, stopped.generation) == (
            "action_required", "claude", 1
        )  # fmt: skip
        assert stopped.reason is not None
        assert "never authorises switching candidates" in stopped.reason

    run_service(backend, scenario)


def test_the_same_profile_driven_as_kanban_and_as_office_gives_the_same_transitions(
    backend: Backend,
) -> None:
    async def drive(service: RouteService, caller: str) -> list[RouteSnapshot]:
        backend.clock.set(T0)
        session = Session(service, backend.clock, f"{caller}-session", caller)
        seen = [await session.start()]
        seen.append(await session.fail(overloaded()))
        seen.append(await session.fire())
        seen.append(await session.fail(usage_limit(backend.clock.now() + timedelta(minutes=1))))
        seen.append(await session.fire())
        seen.append(await session.fail(overloaded()))
        seen.append(await session.fire())
        seen.append(await session.fail(out_of_credits()))
        return seen

    async def scenario(service: RouteService) -> None:
        kanban, office = await drive(service, "kanban"), await drive(service, "office")
        ignored = {"route_id", "caller", "invocation_id"}
        assert [s.model_dump(exclude=ignored) for s in kanban] == [
            s.model_dump(exclude=ignored) for s in office
        ]
        assert [s.state for s in kanban] == [
            "active", "retry_wait", "retrying", "waiting_for_reset", "retrying", "retry_wait",
            "retrying", "action_required",
        ]  # fmt: skip
        histories = [await service.history(f"{c}-session") for c in ("kanban", "office")]
        assert histories[0] == histories[1]

    run_service(backend, scenario)


def test_a_concrete_profile_survives_the_round_trip_through_redis(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, "session-1")
        concrete = ConcreteProfile(id="codex", agent="codex-acp", model="gpt-5")
        started = await session.start(concrete)
        assert started.profile == concrete.model_dump(mode="json")
        waiting = await session.fail(overloaded())
        assert (waiting.state, waiting.retry_max, waiting.deadline) == (
            "retry_wait", 5, in_seconds(5)
        )  # fmt: skip

    run_service(backend, scenario)
