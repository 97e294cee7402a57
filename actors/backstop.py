"""Compatibility: `actors.backstop` moved to `actors.jobs.backstop`; this path keeps working.

Kept for code written against the flat layout and for rq jobs already queued in
Redis under this path.
"""

from actors.jobs.backstop import (
    READ_BATCH,
    BackstopReport,
    fire_backstop,
    host_schedules,
    run_backstop,
)
from actors.jobs.backstop_arming import (
    DEFAULT_GRACE_S,
    DRAIN_TIMEOUT_S,
    FAILURE_TTL_S,
    JOB_FUNCTION,
    JOB_TIMEOUT_S,
    MARKER_SLACK_S,
    MEMO_PRUNE_EVERY_S,
    RESULT_TTL_S,
    BackstopArmer,
    Connect,
    HostBackstops,
    backstop_job_id,
    backstop_second,
)
from actors.store.pool import connection_url

__all__ = [
    "DEFAULT_GRACE_S",
    "DRAIN_TIMEOUT_S",
    "FAILURE_TTL_S",
    "JOB_FUNCTION",
    "JOB_TIMEOUT_S",
    "MARKER_SLACK_S",
    "MEMO_PRUNE_EVERY_S",
    "READ_BATCH",
    "RESULT_TTL_S",
    "BackstopArmer",
    "BackstopReport",
    "Connect",
    "HostBackstops",
    "backstop_job_id",
    "backstop_second",
    "connection_url",
    "fire_backstop",
    "host_schedules",
    "run_backstop",
]
