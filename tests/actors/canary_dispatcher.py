"""Dispatchers for the canary test: their messages carry the secrets the test planted.

The test runs the dispatch job in its own process (actors.jobs.dispatch.dispatch_once), so
it plants the message for a route in PLANTED before the job calls one of these.
"""

from __future__ import annotations

from actors.jobs.dispatcher import NotDispatched, ReplayIdentity

PLANTED: dict[str, str] = {}


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
