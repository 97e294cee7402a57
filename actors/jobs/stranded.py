"""Jobs stranded in rq's intermediate list, put back on their queue (chaos bug B).

rq 3 dequeues with BLMOVE: the job id moves from the queue's list to
`<queue>:intermediate`, and the worker that took it adds it to the started registry a
few Redis round trips later. If that worker dies in between, or Redis restarts after
the move and before the worker read its reply, the id sits in the intermediate list with
status `queued`: no worker will take it, and rq notices only in a maintenance round (every
10 minutes) after a minute more, when it fails the job. The runtime's reconciliation takes
a `queued` job for pending, so the attempt waited that long (or for good).

Each runtime worker sweeps its own queues' intermediate lists (`StrandedSweep.sweep`, at
most once a second): an id that is there, `queued` and not in the started registry, on two
sweeps at least `STRANDED_AFTER_S` apart, is moved back to its queue. A live worker moves a
job from the list to the registry in milliseconds, so one still there after seconds has no
live worker; should a stalled worker start it after all, the job runs twice and its second run
finds the attempt's ledger started and dispatches nothing (actors/jobs/dispatch.py).

The move is one transaction WATCHing the list and the job (the id still in the list and
the job still `queued`, then LREM and RPUSH), so two workers sweeping at once move it
once, and a worker starting it meanwhile (it writes both) cancels the move.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

import redis
from rq import Queue
from rq.job import JobStatus

STRANDED_AFTER_S: Final = 5.0
SWEEP_EVERY_S: Final = 1.0


@dataclass
class StrandedSweep:
    """One worker's sweeper; `clock` is monotonic seconds (injected in tests)."""

    clock: Callable[[], float]
    stranded_after_s: float = STRANDED_AFTER_S
    every_s: float = SWEEP_EVERY_S
    _first_seen: dict[tuple[str, str], float] = field(default_factory=dict)
    _last_sweep: float | None = None

    def due(self) -> bool:
        """Whether a sweep is due (at most one every `every_s`)."""
        return self._last_sweep is None or self.clock() - self._last_sweep >= self.every_s

    def sweep(self, queues: Iterable[Queue]) -> list[str]:
        """Move the stranded jobs of `queues` back to their lists; the ids moved."""
        now = self._last_sweep = self.clock()
        seen: set[tuple[str, str]] = set()
        moved: list[str] = []
        for queue in queues:
            for job_id in _unstarted_intermediate(queue):
                key = (queue.key, job_id)
                seen.add(key)
                first = self._first_seen.setdefault(key, now)
                if now - first >= self.stranded_after_s and requeue(queue, job_id):
                    moved.append(job_id)
                    seen.discard(key)
        # ids gone from the lists are forgotten: the table holds only what is there now
        self._first_seen = {key: at for key, at in self._first_seen.items() if key in seen}
        return moved


def _unstarted_intermediate(queue: Queue) -> list[str]:
    connection = queue.connection
    ids = [_text(item) for item in connection.lrange(queue.intermediate_queue_key, 0, -1)]
    if not ids:
        return []
    registry = queue.started_job_registry
    started = {job_id for job_id, _ in registry.get_job_and_execution_ids(cleanup=False)}
    candidates = [job_id for job_id in ids if job_id not in started]
    with connection.pipeline(transaction=False) as pipeline:
        for job_id in candidates:
            pipeline.hget(queue.job_class.key_for(job_id), "status")
        statuses = pipeline.execute()
    return [job_id for job_id, status in zip(candidates, statuses, strict=True) if _queued(status)]


def _queued(status: bytes | str | None) -> bool:
    return status is not None and _text(status) == JobStatus.QUEUED.value


def requeue(queue: Queue, job_id: str) -> bool:
    """Move `job_id` from the queue's intermediate list to the end of its queue, if it is
    still in the intermediate list; whether it moved."""
    connection: redis.Redis = queue.connection
    source = queue.intermediate_queue_key
    job_key = queue.job_class.key_for(job_id)
    with connection.pipeline() as pipeline:
        try:
            # a worker starting the job meanwhile writes both keys: the move is cancelled
            pipeline.watch(source, job_key)  # type: ignore[no-untyped-call, unused-ignore]
            listed = pipeline.lpos(source, job_id) is not None
            if not listed or not _queued(pipeline.hget(job_key, "status")):
                return False
            pipeline.multi()
            pipeline.lrem(source, 1, job_id)
            pipeline.rpush(queue.key, job_id)
            pipeline.execute()
        except redis.WatchError:  # the list changed: the next sweep looks again
            return False
    return True


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
