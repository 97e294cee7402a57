"""A fake orchestrator dispatcher for dispatch tests, importable by an rq worker.

Each call is recorded as a JSON line in the Redis list `<prefix>:fake:dispatched` on the
running job's connection (the prefix is the job's first argument), so whichever process
or thread runs the job, the test sees the calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict

from rq import get_current_job
from rq.job import Job

from actors.jobs.dispatcher import NotDispatched, ReplayIdentity


def calls_key(prefix: str) -> str:
    return f"{prefix}:fake:dispatched"


Dispatcher = Callable[[str, int, int, str | None, str | None, ReplayIdentity], None]


def record_call(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> Job:
    """Record the call on `<prefix>:fake:dispatched`; the running job, for more to do."""
    job = get_current_job()
    assert job is not None, "a fake dispatcher runs inside an rq job"
    call = {
        "route_id": route_id, "generation": generation, "ordinal": ordinal,
        "candidate": candidate, "reason": reason, "replay": asdict(replay),
        "worker": job.worker_name,
    }  # fmt: skip
    job.connection.rpush(calls_key(str(job.args[0])), json.dumps(call))
    return job


def _dispatcher(
    failure: Callable[[], Exception] | None, *, on: Callable[[int], bool] = lambda _: True
) -> Dispatcher:
    """A dispatcher that records its call, then raises `failure()` if one is given and the
    attempt ordinal is one `on` accepts."""

    def dispatch(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
        route_id: str,
        generation: int,
        ordinal: int,
        candidate: str | None,
        reason: str | None,
        replay: ReplayIdentity,
    ) -> None:
        record_call(route_id, generation, ordinal, candidate, reason, replay)
        if failure is not None and on(ordinal):
            raise failure()

    return dispatch


deliver = _dispatcher(None)
refuse = _dispatcher(lambda: NotDispatched("the orchestrator had no worker for this session"))
# "Not now, try again in 3 s" on every call.
refuse_with_hint = _dispatcher(lambda: NotDispatched("agent pool full", retry_after=3))


def refuse_once_with_hint(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    """ "Not now, in 1 s" the first time an attempt is called; delivered the next time."""
    job = record_call(route_id, generation, ordinal, candidate, reason, replay)
    calls = [json.loads(raw) for raw in job.connection.lrange(calls_key(str(job.args[0])), 0, -1)]
    same = [c for c in calls if (c["route_id"], c["generation"], c["ordinal"]) == (
        route_id, generation, ordinal)]  # fmt: skip
    if len(same) == 1:
        raise NotDispatched("agent pool full", retry_after=1)


explode = _dispatcher(lambda: ConnectionResetError("the orchestrator hung up mid-send"))
