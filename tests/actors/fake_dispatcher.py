"""A fake orchestrator dispatcher for dispatch tests, importable by an rq worker.

Each call is recorded as a JSON line in the Redis list `<prefix>:fake:dispatched` on the
running job's connection (the prefix is the job's first argument), so whichever process
or thread runs the job, the test sees the calls.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from rq import get_current_job

from actors.dispatch import NotDispatched, ReplayIdentity


def calls_key(prefix: str) -> str:
    return f"{prefix}:fake:dispatched"


def _record(  # noqa: PLR0917 - the dispatcher signature (CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    job = get_current_job()
    assert job is not None, "the fake dispatcher runs inside an rq job"
    call = {
        "route_id": route_id, "generation": generation, "ordinal": ordinal,
        "candidate": candidate, "reason": reason, "replay": asdict(replay),
    }  # fmt: skip
    job.connection.rpush(calls_key(str(job.args[0])), json.dumps(call))


def deliver(  # noqa: PLR0917 - the dispatcher signature (CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    _record(route_id, generation, ordinal, candidate, reason, replay)


def refuse(  # noqa: PLR0917 - the dispatcher signature (CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    _record(route_id, generation, ordinal, candidate, reason, replay)
    raise NotDispatched("the orchestrator had no worker for this session")


def explode(  # noqa: PLR0917 - the dispatcher signature (CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    _record(route_id, generation, ordinal, candidate, reason, replay)
    raise ConnectionResetError("the orchestrator hung up mid-send")
