"""The demo's dispatcher: the orchestrator's entry point the runtime calls in an rq worker.

`dispatch` is configured as `actors.demo.dispatcher:dispatch`. For each call it writes, in
one transaction on the running job's Redis connection, a record to the dispatcher's own
log (`<p>:demo:dispatches`) and the same record to the list the simulated orchestrator
pops (`<p>:demo:turns`): "run the next turn of this route, at this generation and
attempt ordinal, on this candidate". The log is the report's source for dispatches and
for the double-dispatch invariant; it is written by the dispatcher, never by the script.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

from pydantic import BaseModel, ConfigDict
from rq import get_current_job

from actors.demo.demo_keys import DemoKeys
from actors.demo.errors import DemoError
from actors.jobs.dispatcher import ReplayIdentity

DISPATCHER_PATH: Final = "actors.demo.dispatcher:dispatch"


class DispatchRecord(BaseModel):
    """One dispatcher call, as logged and as the orchestrator receives it. `at` is the
    dispatcher's wall clock (epoch seconds) when it was called."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    route_id: str
    generation: int
    ordinal: int
    candidate: str | None
    reason: str | None
    provider_session_id: str | None
    prompt_ref: str | None
    worker: str | None
    at: float


def dispatch(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    job = get_current_job()
    if job is None:
        raise DemoError("the demo dispatcher runs inside an rq dispatch job")
    keys = DemoKeys(str(job.args[0]))  # the dispatch job's first argument is the key prefix
    record = DispatchRecord(
        route_id=route_id, generation=generation, ordinal=ordinal, candidate=candidate,
        reason=reason, provider_session_id=replay.provider_session_id,
        prompt_ref=replay.prompt_ref, worker=job.worker_name, at=time.time(),
    )  # fmt: skip
    text = record.model_dump_json()
    with job.connection.pipeline(transaction=True) as pipeline:
        pipeline.rpush(keys.dispatches, text)
        pipeline.rpush(keys.turns, text)
        pipeline.execute()


def read_records(raw: list[Any]) -> list[DispatchRecord]:
    """Records as LRANGE returns them (bytes or text)."""
    return [DispatchRecord.model_validate(json.loads(item)) for item in raw]
