"""A fake dispatcher that is inside its dispatch until the test says so.

`hold` records the call on `<prefix>:fake:dispatched` (with tests/actors/fake_dispatcher.py's
`record_call`), then blocks on the Redis list `<prefix>:fake:release` until the test pushes to it,
or `HOLD_TIMEOUT_S` passes. A test kills the worker meanwhile: a dispatch whose outcome
nobody can know.
"""

from __future__ import annotations

from typing import Final

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
    job.connection.blpop([release_key(str(job.args[0]))], timeout=HOLD_TIMEOUT_S)
