"""Request ids: a report or manual action sent again with the same id (Ray re-sending a
batch to a restarted host, a client retrying) is applied once and answers its first
outcome's snapshot, even when the route has moved on meanwhile; reports may name the
attempt they are about. Each test runs on fakeredis (unit tier) and on the session's real
Redis (integration tier)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest

from actors.engine.service import RouteService
from actors.errors import InvalidIdentifierError, StaleOrdinalError
from actors.keys import AttemptFence
from actors.routes.models import RouteSnapshot
from actors.store.route_codec import DEFAULT_REQUESTS_KEPT, DEFAULT_REQUESTS_TTL_S
from policy import Outcome
from tests.actors.conftest import Backend, raw_state
from tests.actors.route_drivers import run_service
from tests.actors.route_scenarios import (
    Session,
    candidate,
    overloaded,
    profile,
    retries,
    safe_turn,
)

ROUTE = "session-1"


def two_candidates() -> object:
    return profile(candidate("claude", transient=retries(3, 5, Outcome.SKIP)), candidate("codex"))


async def fail(service: RouteService, generation: int, request_id: str) -> RouteSnapshot:
    return await service.report_failure(
        ROUTE, generation, overloaded(), safe_turn(), caller="kanban",
        invocation_id=f"inv-{ROUTE}", request_id=request_id,
    )  # fmt: skip


def test_a_replayed_report_after_its_retry_fired_answers_the_first_outcome(
    backend: Backend,
) -> None:
    """The measured break: the restarted host fired the overdue retry, so the route is
    `retrying` at the same generation and would take the replay as a new failure."""

    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        session = Session(service, backend.clock, ROUTE)
        await session.start(two_candidates())  # type: ignore[arg-type]
        first = await fail(service, 1, "req-1")
        await session.fire()
        before = await raw_state(client, service.store.keys, ROUTE)
        replayed = await fail(service, 1, "req-1")
        assert replayed == first
        assert await raw_state(client, service.store.keys, ROUTE) == before
        assert (await service.snapshot(ROUTE)).state == "retrying"
        fresh = await fail(service, 1, "req-2")  # a new report is a new failure
        assert (fresh.state, fresh.retry_ordinal) == ("retry_wait", 2)
        await client.aclose()

    run_service(backend, scenario)


@dataclass(frozen=True)
class Action:
    """A manual action, the state it needs and how to reach that state first."""

    name: str
    prepare: Callable[[Session], Awaitable[object]]
    call: Callable[[RouteService, int, str], Awaitable[RouteSnapshot]]


async def waiting(session: Session) -> None:
    await session.fail(overloaded())


async def stopped(session: Session) -> None:
    await session.fail(overloaded())
    snapshot = await session.service.snapshot(ROUTE)
    await session.service.stop(ROUTE, snapshot.generation)


async def active(session: Session) -> None:
    return None


ACTIONS = [
    Action("retry_now", waiting, lambda s, g, r: s.retry_now(ROUTE, g, request_id=r)),
    Action("skip_now", waiting, lambda s, g, r: s.skip_now(ROUTE, g, request_id=r)),
    Action("cancel_wait", waiting, lambda s, g, r: s.cancel_wait(ROUTE, g, request_id=r)),
    Action("stop", waiting, lambda s, g, r: s.stop(ROUTE, g, request_id=r)),
    Action("resume", stopped, lambda s, g, r: s.resume(ROUTE, g, request_id=r)),
    Action("start_fresh", stopped, lambda s, g, r: s.start_fresh(ROUTE, g, request_id=r)),
    Action("close", active, lambda s, g, r: s.close(ROUTE, g, request_id=r)),
    Action("report_success", active, lambda s, g, r: s.report_success(ROUTE, g, request_id=r)),
]


@pytest.mark.parametrize("action", ACTIONS, ids=lambda action: action.name)
def test_a_replayed_manual_action_is_a_no_op_answering_the_first_snapshot(
    backend: Backend, action: Action
) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        session = Session(service, backend.clock, ROUTE)
        await session.start(two_candidates())  # type: ignore[arg-type]
        await action.prepare(session)
        generation = (await service.snapshot(ROUTE)).generation
        first = await action.call(service, generation, "req-action")
        after_first = await raw_state(client, service.store.keys, ROUTE)
        backend.clock.advance(timedelta(seconds=1))  # a later replay restamps nothing
        replayed = await action.call(service, generation, "req-action")
        assert replayed == first
        assert await raw_state(client, service.store.keys, ROUTE) == after_first
        await client.aclose()

    run_service(backend, scenario)


def test_a_replayed_start_answers_the_route_it_created(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        created = await service.start(
            ROUTE, two_candidates(), caller="kanban", invocation_id="inv",  # type: ignore[arg-type]
            request_id="req-start",
        )  # fmt: skip
        await fail(service, 1, "req-fail")
        again = await service.start(
            ROUTE, two_candidates(), caller="kanban", invocation_id="inv",  # type: ignore[arg-type]
            request_id="req-start",
        )  # fmt: skip
        assert again == created

    run_service(backend, scenario)


def test_a_report_about_an_earlier_attempt_is_refused(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, ROUTE)
        await session.start(two_candidates())  # type: ignore[arg-type]
        await session.fail(overloaded())
        fired = await session.fire()
        assert fired.attempt_ordinal == 1
        with pytest.raises(StaleOrdinalError) as refused:
            await service.report_failure(
                ROUTE, 1, overloaded(), safe_turn(), caller="kanban",
                invocation_id=f"inv-{ROUTE}", attempt=0,
            )  # fmt: skip
        assert (refused.value.expected, refused.value.actual) == (0, 1)
        current = await service.report_failure(
            ROUTE, 1, overloaded(), safe_turn(), caller="kanban",
            invocation_id=f"inv-{ROUTE}", attempt=1,
        )  # fmt: skip
        assert current.state == "retry_wait"

    run_service(backend, scenario)


def test_a_route_keeps_its_last_request_ids_for_a_day(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        keys = service.store.keys
        session = Session(service, backend.clock, ROUTE)
        await session.start(two_candidates())  # type: ignore[arg-type]
        for n in range(DEFAULT_REQUESTS_KEPT + 4):
            await service.stop(ROUTE, 1, request_id=f"req-{n}")  # each a new request
            await service.resume(ROUTE, 1, request_id=f"res-{n}")
        kept = await client.hkeys(keys.requests(ROUTE))
        assert len(kept) == DEFAULT_REQUESTS_KEPT
        assert await client.lrange(keys.request_order(ROUTE), 0, -1) == [
            f"{kind}-{n}" for n in range(12, 20) for kind in ("req", "res")
        ]
        assert 0 < await client.ttl(keys.requests(ROUTE)) <= DEFAULT_REQUESTS_TTL_S
        assert await service.store.first_outcome(ROUTE, "req-0") is None  # forgotten
        first = await service.store.first_outcome(ROUTE, "res-19")
        assert first is not None
        assert first.state == "active"
        await client.aclose()

    run_service(backend, scenario)


def test_a_timer_racing_a_replay_fires_once(backend: Backend) -> None:
    async def scenario(service: RouteService) -> None:
        session = Session(service, backend.clock, ROUTE)
        await session.start(two_candidates())  # type: ignore[arg-type]
        first = await fail(service, 1, "req-1")
        assert first.deadline is not None
        backend.clock.set(first.deadline)
        fired = await service.fire_due(AttemptFence(ROUTE, 1, first.attempt_ordinal))
        assert fired.state == "retrying"
        decided = await session.decisions()
        assert await fail(service, 1, "req-1") == first
        assert await session.decisions() == decided
        assert decided.count("retry") == 1

    run_service(backend, scenario)


@pytest.mark.parametrize("bad", ["", "a b", "x" * 129, "key=sk-live\n"])
def test_a_malformed_request_id_is_refused_naming_it_and_nothing_is_written(
    backend: Backend, bad: str
) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        session = Session(service, backend.clock, ROUTE)
        await session.start(two_candidates())  # type: ignore[arg-type]
        before = await raw_state(client, service.store.keys, ROUTE)
        with pytest.raises(InvalidIdentifierError) as refused:
            await service.stop(ROUTE, 1, request_id=bad)
        assert "request id" in str(refused.value)
        assert await raw_state(client, service.store.keys, ROUTE) == before
        await client.aclose()

    run_service(backend, scenario)
