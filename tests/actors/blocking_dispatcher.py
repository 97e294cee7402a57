"""A fake dispatcher that is inside its dispatch until the test says so.

`hold` records the call on `<prefix>:fake:dispatched` (with tests/actors/fake_dispatcher.py's
`record_call`), then blocks on the Redis list `<prefix>:fake:release` until the test pushes to it,
or `HOLD_TIMEOUT_S` passes. A test kills the worker meanwhile, or lets the dispatch
timeout pass: a dispatch whose outcome nobody can know.
"""

from __future__ import annotations

import time
from typing import Final

from actors.jobs.dispatcher import ReplayIdentity
from tests.actors.fake_dispatcher import record_call

HOLD_TIMEOUT_S: Final = 60
POLL_S: Final = 0.05


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
    job.connection.blpop([release_key(str(job.args[0]))], timeout=HOLD_TIMEOUT_S)


def hold_the_hung(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    """Hung for a route whose id starts with `hung`, until the test pushes to the release
    list or HOLD_TIMEOUT_S passes (polling: a blocking pop would end early at the worker
    connection's socket timeout, and a hung dispatcher does not); any other route is
    delivered at once. Every call is recorded: one installation's dispatcher, hung for one
    route only."""
    job = record_call(route_id, generation, ordinal, candidate, reason, replay)
    if not route_id.startswith("hung"):
        return
    until = time.monotonic() + HOLD_TIMEOUT_S
    while time.monotonic() < until and not job.connection.exists(release_key(str(job.args[0]))):
        time.sleep(POLL_S)
