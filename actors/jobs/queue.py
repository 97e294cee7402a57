"""The dispatch queue: its name, the deterministic ids of dispatch jobs, and the one way a
dispatch is enqueued (the attempt's ledger written `queued` first, the job id deduplicating).
Both jobs build on this module; neither imports the other to enqueue."""

from __future__ import annotations

import hashlib
import math
from datetime import datetime
from typing import Any, Final

from redis import Redis
from rq import Queue, Worker
from rq.exceptions import DuplicateJobError, NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from actors.engine.settings import DEFAULT_DISPATCH_TIMEOUT_S, default_queue_name
from actors.jobs.ledger import LEDGER_TTL_S, DispatchLedger
from actors.keys import AttemptFence, KeySpace

JOB_FUNCTION: Final = "actors.jobs.dispatch.run_dispatch"
DEFAULT_QUEUE: Final = "recovery-dispatch"
# rq's own limit on a dispatch job is the dispatch timeout and this much more: past the
# timeout the job still writes its ledger and settles the route, and rq must not kill it
# first (a killed job leaves its dispatch `started`, for reconciliation to find).
SETTLE_MARGIN_S: Final = 30


def dispatch_job_timeout(dispatch_timeout_s: float) -> int:
    """rq's timeout (whole seconds) of a dispatch job whose dispatcher call is bounded by
    `dispatch_timeout_s`."""
    return math.ceil(dispatch_timeout_s) + SETTLE_MARGIN_S


JOB_TIMEOUT_S: Final = dispatch_job_timeout(DEFAULT_DISPATCH_TIMEOUT_S)
# Jobs rq holds that will still run (or are running): enqueuing again would only repeat them.
PENDING_JOB_STATUSES: Final = frozenset(
    {JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.STARTED, JobStatus.DEFERRED}
)


def dispatch_job_id(keys: KeySpace, fence: AttemptFence) -> str:
    """rq admits only `[A-Za-z0-9_-]` in job ids: a hash of the attempt's ledger key."""
    ledger_key = keys.dispatch(fence)
    return "dispatch-" + hashlib.sha256(ledger_key.encode()).hexdigest()[:40]


def backstop_queue_name(dispatch_queue_name: str) -> str:
    """The queue of the backstop jobs of dispatch queue `dispatch_queue_name`: their own,
    with their own worker (actors/jobs/workers.py), so a hung dispatcher never delays one."""
    return f"{dispatch_queue_name}-backstops"


def dispatch_queue(connection: Redis, name: str = DEFAULT_QUEUE) -> Queue:
    """The rq queue dispatch jobs go to, with the JSON serializer."""
    return Queue(name, connection=connection, serializer=JSONSerializer)


def enqueue_dispatch(
    queue: Queue,
    keys: KeySpace,
    fence: AttemptFence,
    *,
    dispatcher: str,
    now: datetime,
    host_id: str | None = None,
    timeout_s: float = DEFAULT_DISPATCH_TIMEOUT_S,
    redeliveries: int = 0,
) -> str | None:
    """Write the attempt's ledger `queued` (if it has none) and enqueue its job. The job
    id, or None when the ledger shows the attempt already started or finished (nothing is
    enqueued then: it was dispatched, or its outcome is someone else's to settle).
    `host_id`: the route host owning the route, so that a schedule the job writes (a
    NotDispatched waiting for its redelivery) gets that host's durable backstop.
    `timeout_s`: the installation's dispatch timeout (the job's rq timeout is longer).
    `redeliveries`: the route's count of NotDispatched answers for the attempt (its
    `redeliveries`): a redelivery re-queues the attempt's finished ledger."""
    job_id = dispatch_job_id(keys, fence)  # validates the route id
    ledger = DispatchLedger(queue.connection, keys)
    refused = ledger.queue(fence, job_id, now, redeliveries=redeliveries)
    if refused not in ("applied", "queued"):
        return None
    args = (keys.prefix, fence.route_id, fence.generation, fence.ordinal, dispatcher, host_id)
    _enqueue_once(queue, job_id, args, dispatch_job_timeout(timeout_s))
    return job_id


def _enqueue_once(queue: Queue, job_id: str, args: tuple[Any, ...], timeout_s: int) -> None:
    """Enqueue unless rq still holds a pending job with this id (the id dedups); a job rq
    has done with, or one `started` by a worker no longer registered, is replaced. A
    duplicate that slips through is a no-op run (the ledger refuses its start).

    A job queued but taken by a worker that died before starting it is not seen here (it
    is `queued`): the workers' sweep puts it back on its queue (actors/jobs/stranded.py)."""
    options: dict[str, Any] = {
        "job_id": job_id, "job_timeout": timeout_s, "result_ttl": 3600,
        "failure_ttl": LEDGER_TTL_S, "unique": True,
    }  # fmt: skip
    try:
        queue.enqueue(JOB_FUNCTION, *args, **options)
    except DuplicateJobError:
        try:
            existing = Job.fetch(job_id, connection=queue.connection, serializer=JSONSerializer)
        except NoSuchJobError:  # gone meanwhile
            queue.enqueue(JOB_FUNCTION, *args, **options)
            return
        if existing.get_status() in PENDING_JOB_STATUSES and not _orphaned(existing):
            return
        existing.delete()
        queue.enqueue(JOB_FUNCTION, *args, **options)


def _orphaned(job: Job) -> bool:
    """Whether `job` is `started` by a worker that is gone: killed after rq marked it
    started and before the job wrote its ledger `started` (reconciliation, run when a
    worker dies, finds that attempt `queued`); rq would fail it only once the worker's
    heartbeat lapsed, minutes on, and never run it again. Nothing else can run it now."""
    if job.get_status() != JobStatus.STARTED or not job.worker_name:
        return False
    worker_key = Worker.redis_worker_namespace_prefix + job.worker_name
    return not job.connection.exists(worker_key)


__all__ = [
    "DEFAULT_QUEUE",
    "JOB_FUNCTION",
    "JOB_TIMEOUT_S",
    "PENDING_JOB_STATUSES",
    "SETTLE_MARGIN_S",
    "backstop_queue_name",
    "default_queue_name",
    "dispatch_job_id",
    "dispatch_job_timeout",
    "dispatch_queue",
    "enqueue_dispatch",
]
