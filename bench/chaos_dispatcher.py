"""The recording dispatcher of bench/chaos.py (and bench/dispatch.py, which reads the `at`
of each call as the moment the dispatcher was called): the orchestrator's entry point, run by the
runtime's rq workers as `bench.chaos_dispatcher:record` (a checkout's folder is on their
import path; bench/ itself must not be: its `http.py` would hide the standard library's).

Every call appends one line to its own log, an append-only file named by the
environment (LOG_ENV; `recovery up` passes its environment to the workers): a
`DispatchRecord` as the demo's dispatcher writes it (actors/demo/dispatcher.py). A file,
not a Redis list, because the harness kills Redis: the log must outlive whatever Redis
loses, and it is both the invariant's witness (each attempt dispatched at most once)
and the orchestrator's inbox (the harness tails it to run the dispatched turns). One
`os.write` of one line on an O_APPEND descriptor: lines from concurrent workers never
interleave, and a worker killed after the write leaves the line in the page cache.
"""

from __future__ import annotations

import os
import time
from typing import Final

from rq import get_current_job

from actors.demo.dispatcher import DispatchRecord
from actors.jobs.dispatcher import ReplayIdentity

LOG_ENV: Final = "CHAOS_DISPATCH_LOG"
DISPATCHER: Final = "bench.chaos_dispatcher:record"


def record(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    """Log the call (the send itself), then return: delivered."""
    job = get_current_job()
    line = DispatchRecord(
        route_id=route_id, generation=generation, ordinal=ordinal, candidate=candidate,
        reason=reason, provider_session_id=replay.provider_session_id,
        prompt_ref=replay.prompt_ref, worker=None if job is None else job.worker_name,
        at=time.time(),
    ).model_dump_json()  # fmt: skip
    descriptor = os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, (line + "\n").encode())
    finally:
        os.close(descriptor)


def read_log(path: str, offset: int = 0) -> tuple[list[DispatchRecord], int]:
    """The complete lines of the log from byte `offset`, and the offset after them."""
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            data = log.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1  # a line being written is read next time
    lines = data[:end].splitlines()
    return [DispatchRecord.model_validate_json(line) for line in lines if line], offset + end
