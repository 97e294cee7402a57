"""A fake dispatcher that is inside its dispatch until the test says so.

`hold` records the call on `<prefix>:fake:dispatched` (as tests/actors/fake_dispatcher.py
does), then blocks on the Redis list `<prefix>:fake:release` until the test pushes to it,
or `HOLD_TIMEOUT_S` passes. A test kills the worker meanwhile: a dispatch whose outcome
nobody can know.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Final

from rq import get_current_job

from actors.dispatch import ReplayIdentity
from tests.actors.fake_dispatcher import calls_key

HOLD_TIMEOUT_S: Final = 60


def release_key(prefix: str) -> str:
    return f"{prefix}:fake:release"


def hold(  # noqa: PLR0917 - the dispatcher signature (CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    job = get_current_job()
    assert job is not None, "the blocking dispatcher runs inside an rq job"
    prefix = str(job.args[0])
    call = {
        "route_id": route_id, "generation": generation, "ordinal": ordinal,
        "candidate": candidate, "reason": reason, "replay": asdict(replay),
        "worker": job.worker_name,
    }  # fmt: skip
    job.connection.rpush(calls_key(prefix), json.dumps(call))
    job.connection.blpop([release_key(prefix)], timeout=HOLD_TIMEOUT_S)
