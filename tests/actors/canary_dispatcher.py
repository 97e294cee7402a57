"""Dispatchers for the canary test: their messages carry the secrets the test planted.

The test runs the dispatch job in its own process (actors.jobs.dispatch.dispatch_once), so
it plants the message for a route in PLANTED before the job calls one of these; an rq
worker of `recovery up` gets it through its environment (refuse_from_env).
"""

from __future__ import annotations

import os

from actors.jobs.dispatcher import NotDispatched, ReplayIdentity

PLANTED: dict[str, str] = {}
MESSAGE_ENV = "RECOVERY_TEST_CANARY_MESSAGE"  # for a dispatcher in an rq worker of `up`


def refuse(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    """Nothing sent, with a message that quotes the planted secrets."""
    raise NotDispatched(PLANTED[route_id])


def refuse_from_env(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    """Nothing sent, with the message its worker's environment plants (MESSAGE_ENV)."""
    raise NotDispatched(os.environ[MESSAGE_ENV])


def explode(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    """An ambiguous outcome whose exception text quotes the planted secrets."""
    raise ConnectionError(PLANTED[route_id])
