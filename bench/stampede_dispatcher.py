"""The dispatcher of bench/stampede.py: a fake orchestrator send of fixed latency, run by
the runtime's rq workers (`stampede_dispatcher:dispatch`, with bench/ on their import
path).

Each call sleeps LATENCY_S (the send), then pushes one JSON record on the Redis list
`<prefix>:bench:dispatches` with the route, attempt, reason and the wall-clock times the
send started and ended (and when rq enqueued the job), on the running job's connection.
The bench pops that list: it learns which route was dispatched (the probe's reason
starts with `circuit_probe`) and computes in-flight counts from the start/end intervals.
Wall-clock `time.time()`: the workers and the bench run on one machine.
"""

from __future__ import annotations

import json
import time
from datetime import UTC
from typing import Any, Final

from rq import get_current_job

from actors.jobs.dispatcher import ReplayIdentity

LATENCY_S: Final = 0.05


def records_key(prefix: str) -> str:
    return f"{prefix}:bench:dispatches"


def dispatch(  # noqa: PLR0917 - the dispatcher signature (docs/CONTRACTS.md, Routes)
    route_id: str,
    generation: int,
    ordinal: int,
    candidate: str | None,
    reason: str | None,
    replay: ReplayIdentity,
) -> None:
    """Send (sleep LATENCY_S), then record the send's interval for the bench."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("the stampede dispatcher runs inside an rq job")
    started = time.time()
    time.sleep(LATENCY_S)
    ended = time.time()
    enqueued = job.enqueued_at
    if enqueued is not None and enqueued.tzinfo is None:  # rq stores UTC
        enqueued = enqueued.replace(tzinfo=UTC)
    record: dict[str, Any] = {
        "route_id": route_id, "generation": generation, "ordinal": ordinal,
        "candidate": candidate, "reason": reason or "", "worker": job.worker_name,
        "enqueued": None if enqueued is None else enqueued.timestamp(),
        "started": started, "ended": ended, "replay_route": replay.route_id,
    }  # fmt: skip
    job.connection.rpush(records_key(str(job.args[0])), json.dumps(record))
