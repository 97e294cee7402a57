"""Commands of the wrong type or shape are refused naming the field and the value, before
anything is read or written: a generation given as `True`, `1.0` or "1", a report without
evidence, an attempt that is not a count, a profile of too many candidates. Each test runs
on fakeredis (unit tier) and on the session's real Redis (integration tier)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import ValidationError

from actors.engine.service import RouteService
from actors.errors import InvalidCommandError
from policy import Outcome
from policy.document import MAX_CANDIDATES
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


@pytest.mark.parametrize("generation", [True, 1.0, "1", -1])
def test_a_generation_that_is_not_an_integer_is_refused_naming_it(
    backend: Backend, generation: Any
) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        await Session(service, backend.clock, ROUTE).start(
            profile(candidate("claude", transient=retries(2, 1, Outcome.STOP)))
        )
        before = await raw_state(client, service.store.keys, ROUTE)
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: service.stop(ROUTE, generation),
            lambda: service.report_failure(
                ROUTE, generation, overloaded(), safe_turn(), caller="kanban", invocation_id="i"
            ),
        ]
        for call in calls:
            with pytest.raises(InvalidCommandError) as refused:
                await call()
            assert refused.value.field == "expected_generation"
            assert str(refused.value).startswith(
                f"expected_generation: must be an integer >= 0, got {generation!r}"
            )
        assert await raw_state(client, service.store.keys, ROUTE) == before
        await client.aclose()

    run_service(backend, scenario)


@pytest.mark.parametrize(
    ("field", "changes"),
    [
        ("evidence", {"evidence": None}),
        ("evidence", {"evidence": "529 Overloaded"}),
        ("attempt", {"attempt": 1.5}),
        ("attempt", {"attempt": True}),
    ],
)
def test_a_report_of_the_wrong_shape_is_refused_naming_the_field(
    backend: Backend, field: str, changes: dict[str, Any]
) -> None:
    async def scenario(service: RouteService) -> None:
        client = backend.raw()
        await Session(service, backend.clock, ROUTE).start(
            profile(candidate("claude", transient=retries(2, 1, Outcome.STOP)))
        )
        before = await raw_state(client, service.store.keys, ROUTE)
        arguments: dict[str, Any] = {"evidence": overloaded(), "attempt": None, **changes}
        with pytest.raises(InvalidCommandError) as refused:
            await service.report_failure(
                ROUTE, 1, arguments["evidence"], safe_turn(), caller="kanban",
                invocation_id="i", attempt=arguments["attempt"],
            )  # fmt: skip
        assert refused.value.field == field
        assert await raw_state(client, service.store.keys, ROUTE) == before
        await client.aclose()

    run_service(backend, scenario)


def test_a_profile_of_more_candidates_than_the_limit_is_refused_naming_it() -> None:
    names = [f"c{n}" for n in range(MAX_CANDIDATES + 1)]
    with pytest.raises(ValidationError) as refused:
        profile(*(candidate(name) for name in names))
    assert refused.value.errors()[0]["loc"] == ("candidates",)
    assert f"at most {MAX_CANDIDATES} items" in str(refused.value)
    profile(*(candidate(name) for name in names[:MAX_CANDIDATES]))  # the limit itself is fine
