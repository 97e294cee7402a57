"""A batch of route commands: one pipelined read, one pipelined write, outcomes per item.
Runs on fakeredis and on the session's real Redis (the `backend` fixture)."""

from __future__ import annotations

from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from actors.engine.batch import rounds
from actors.engine.classifier import RoundClassifier
from actors.engine.service import RouteService
from actors.errors import (
    InvalidRouteIdError,
    InvalidStateError,
    StaleGenerationError,
    StoreUnavailableError,
)
from actors.routes.commands import (
    FireDue,
    ReportFailure,
    ReportSuccess,
    RetryNow,
    RouteCommand,
    SkipNow,
    Start,
)
from actors.routes.models import RouteSnapshot
from catalogue import classify
from tests.actors.conftest import Backend
from tests.actors.route_builders import T0
from tests.actors.route_drivers import run_service
from tests.actors.route_scenarios import overloaded, safe_turn, seed_profile


def start(route_id: str, session: str | None = None) -> tuple[str, RouteCommand]:
    return route_id, Start(seed_profile(), "kanban", f"inv-{route_id}", session)


def failure(route_id: str, generation: int = 1) -> tuple[str, RouteCommand]:
    report = ReportFailure(generation, overloaded(), safe_turn(), "kanban", f"inv-{route_id}")
    return route_id, report


def snapshot_of(outcome: RouteSnapshot | Exception) -> RouteSnapshot:
    assert isinstance(outcome, RouteSnapshot), outcome
    return outcome


def test_rounds_put_each_route_at_most_once_per_round_in_the_given_order() -> None:
    items = [start("a"), start("b"), failure("a"), failure("a"), failure("c"), failure("b")]
    assert rounds(items) == [[0, 1, 4], [2, 5], [3]]
    assert rounds([]) == []


def test_a_batch_applies_every_route_and_each_route_in_order(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        items = [start(f"r{i}") for i in range(20)] + [failure(f"r{i}") for i in range(20)]
        outcomes = await service.run_many(items)
        for outcome in outcomes[:20]:
            assert (snapshot_of(outcome).state, snapshot_of(outcome).generation) == ("active", 1)
        for outcome in outcomes[20:]:
            waiting = snapshot_of(outcome)
            assert (waiting.state, waiting.retry_ordinal) == ("retry_wait", 1)
        assert len(await service.schedules()) == 20
        assert [r.decision for r in await service.history("r7")] == ["start", "retry"]

    run_service(backend, scenario)


def test_one_items_error_never_fails_the_others(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        await service.run_many([start("good"), start("stale")])
        outcomes = await service.run_many(
            [failure("good"), failure("stale", generation=5), ("bad id!", ReportSuccess(1)),
             ("fresh", SkipNow(0)), start("good")]
        )  # fmt: skip
        assert snapshot_of(outcomes[0]).state == "retry_wait"
        assert isinstance(outcomes[1], StaleGenerationError)
        assert (outcomes[1].expected, outcomes[1].actual) == (5, 1)
        assert isinstance(outcomes[2], InvalidRouteIdError)
        assert isinstance(outcomes[3], InvalidStateError)
        assert isinstance(outcomes[4], StaleGenerationError), "a second start of a started route"
        assert (await service.snapshot("stale")).state == "active", (
            "the rejected item wrote nothing"
        )

    run_service(backend, scenario)


def test_a_skip_in_a_batch_completes_the_switch_to_the_next_candidate(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        await service.run_many([start("a"), start("b")])
        await service.run_many([failure("a"), failure("b")])
        outcomes = await service.run_many([("a", SkipNow(1)), ("b", SkipNow(1))])
        for outcome in outcomes:
            switched = snapshot_of(outcome)
            assert (switched.state, switched.generation) == ("active", 2)
            assert switched.candidate_id != "claude"

    run_service(backend, scenario)


def test_a_timer_that_loses_to_a_manual_action_in_the_same_batch_returns_the_route(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService) -> None:
        await service.run_many([start("a")])
        [waiting] = await service.run_many([failure("a")])
        pending = snapshot_of(waiting)
        assert pending.deadline is not None
        backend.clock.set(pending.deadline)
        timer = FireDue(pending.generation, pending.attempt_ordinal)
        retried, fired = await service.run_many([("a", RetryNow(1)), ("a", timer)])
        assert snapshot_of(retried).state == "retrying"
        assert snapshot_of(fired) == snapshot_of(retried), "the timer found nothing pending"
        decisions = [r.decision for r in await service.history("a")]
        assert decisions == ["start", "retry", "retry_now"], "applied once, by the action"

    run_service(backend, scenario)


def test_a_provider_session_id_is_kept_until_a_switch_forgets_it(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        [started] = await service.run_many([start("a", session="native-1")])
        assert snapshot_of(started).provider_session_id == "native-1"
        [waiting] = await service.run_many([failure("a")])
        assert snapshot_of(waiting).provider_session_id == "native-1", "a report naming none"
        [skipped] = await service.run_many([("a", SkipNow(1))])
        assert snapshot_of(skipped).provider_session_id is None, "another candidate's agent"

    run_service(backend, scenario)


def test_a_redis_failure_fails_every_item_of_the_round_and_writes_nothing(
    fake_backend: Backend,
) -> None:
    async def scenario(service: RouteService) -> None:
        await service.run_many([start("a"), start("b")])
        client: Any = service.store._client  # the store's own client, to break it
        original = client.pipeline

        async def refused(*_args: Any, **_kwargs: Any) -> None:
            raise RedisConnectionError("connection refused")

        def broken_pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = original(*args, **kwargs)
            pipe.execute = refused
            return pipe

        client.pipeline = broken_pipeline
        outcomes = await service.run_many([failure("a"), failure("b")])
        client.pipeline = original
        assert all(isinstance(o, StoreUnavailableError) for o in outcomes), outcomes
        assert [s.state for s in await service.store.snapshots(["a", "b"])] == ["active"] * 2
        assert await service.schedules() == []

    run_service(fake_backend, scenario)


def test_a_round_classifies_each_distinct_evidence_once() -> None:
    now = T0
    classifier = RoundClassifier()
    first = classifier(overloaded(), now)
    assert classifier(overloaded(), now) is first, "equal evidence: the same classification"
    assert first == classify(overloaded(), now)
    with_header = overloaded().model_copy(update={"headers": {"retry-after": "30"}})
    other = classifier(with_header, now)
    assert other is not first
    assert other.retry_after_s == 30, "a header makes it another evidence"


def test_a_turns_provider_session_id_is_recorded_when_the_report_names_none(
    backend: Backend,
) -> None:
    async def scenario(service: RouteService) -> None:
        await service.run_many([start("a", session="native-1")])
        turn = safe_turn().model_copy(update={"provider_session_id": "native-2"})
        report = ReportFailure(1, overloaded(), turn, "kanban", "inv-a")
        [waiting] = await service.run_many([("a", report)])
        assert snapshot_of(waiting).provider_session_id == "native-2"

    run_service(backend, scenario)
