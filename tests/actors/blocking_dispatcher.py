"""A fake dispatcher that is inside its dispatch until the test says so.

`hold` records the call on `<prefix>:fake:dispatched` (with tests/actors/fake_dispatcher.py's
`record_call`), then blocks on the Redis list `<prefix>:fake:release` until the test pushes to it,
or `HOLD_TIMEOUT_S` passes. A test kills the worker meanwhile, or lets the dispatch
timeout pass: a dispatch whose outcome nobody can know.
"""

from __future__ import annotations

from typing import Any, Final

import redis

from actors.jobs.dispatcher import ReplayIdentity
from tests.actors.fake_dispatcher import record_call

HOLD_TIMEOUT_S: Final = 60


def release_key(prefix: str) -> str:
    return f"{prefix}:fake:release"


def hold(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    job = record_call(route_id, generation, ordinal, candidate, reason, replay)
    wait_released(job)


def hold_the_hung(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    """Hung for a route whose id starts with `hung`, until the test pushes to the release
    list or HOLD_TIMEOUT_S passes; any other route is delivered at once. Every call is
    recorded: one installation's dispatcher, hung for one route only."""
    job = record_call(route_id, generation, ordinal, candidate, reason, replay)
    if route_id.startswith("hung"):
        wait_released(job)


def wait_released(job: Any) -> None:
    """Block until the test pushes to the release list (or HOLD_TIMEOUT_S passes), on a
    connection of its own: the worker connection's socket timeout would end the pop early,
    and a hung dispatcher does not end early. The push is put back for any other held call."""
    pool = job.connection.connection_pool
    options = {**pool.connection_kwargs, "socket_timeout": None}
    client = redis.Redis(connection_pool=redis.ConnectionPool(pool.connection_class, **options))
    key = release_key(str(job.args[0]))
    try:
        popped = client.blpop([key], timeout=HOLD_TIMEOUT_S)
        if popped is not None:
            client.lpush(key, popped[1])
    finally:
        client.close()
