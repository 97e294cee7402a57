"""Compatibility: `actors.dispatch` moved to `actors.jobs.dispatch`; this path keeps working.

Kept for code written against the flat layout and for rq jobs already queued in
Redis under this path.
"""

from actors.jobs.dispatch import (
    REASON_AMBIGUOUS,
    REASON_UNLOADABLE,
    RunResult,
    dispatch_once,
    run_dispatch,
)
from actors.jobs.dispatcher import Dispatcher, NotDispatched, ReplayIdentity, load_dispatcher
from actors.jobs.ledger import LEDGER_TTL_S, DispatchLedger, LedgerEntry, LedgerState, Outcome
from actors.jobs.queue import (
    DEFAULT_QUEUE,
    JOB_FUNCTION,
    JOB_TIMEOUT_S,
    PENDING_JOB_STATUSES,
    default_queue_name,
    dispatch_job_id,
    dispatch_queue,
    enqueue_dispatch,
)
from actors.jobs.reconcile import (
    DEFAULT_STARTED_TIMEOUT_S,
    REASON_ABANDONED,
    ReconcileReport,
    live_workers,
    reconcile,
    retrying_routes,
)

__all__ = [
    "DEFAULT_QUEUE",
    "DEFAULT_STARTED_TIMEOUT_S",
    "JOB_FUNCTION",
    "JOB_TIMEOUT_S",
    "LEDGER_TTL_S",
    "PENDING_JOB_STATUSES",
    "REASON_ABANDONED",
    "REASON_AMBIGUOUS",
    "REASON_UNLOADABLE",
    "DispatchLedger",
    "Dispatcher",
    "LedgerEntry",
    "LedgerState",
    "NotDispatched",
    "Outcome",
    "ReconcileReport",
    "ReplayIdentity",
    "RunResult",
    "default_queue_name",
    "dispatch_job_id",
    "dispatch_once",
    "dispatch_queue",
    "enqueue_dispatch",
    "live_workers",
    "load_dispatcher",
    "reconcile",
    "retrying_routes",
    "run_dispatch",
]
