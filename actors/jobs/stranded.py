"""Jobs no live worker will run, put back on their queue (chaos bug B and its kin).

rq 3 dequeues with BLMOVE: the job id moves from the queue's list to
`<queue>:intermediate`; the worker then records an execution in the started registry and
marks the job `started`. A worker that dies along the way (killed, or quitting on a Redis
error: rq's worker quits on any error outside a job), or a Redis restart that loses a
reply, leaves the job in one of two places where no worker takes it:

- in the intermediate list, `queued`, with no execution or only executions of workers
  that are gone;
- in the started registry, `started`, by a worker that is gone (it died before the job
  wrote its dispatch ledger `started`, or after: the ledger then makes the run a no-op).

rq notices only in a maintenance round (every 10 minutes) and then fails the job; the
runtime's reconciliation takes a `queued` or `started` job for pending, so the attempt
waited that long, or for good. Each runtime worker sweeps its own queues
(`StrandedSweep.sweep`, at most once a second): a job found so on two sweeps at least
`STRANDED_AFTER_S` apart is moved back to its queue, `queued`, its dead executions
dropped from the started registry. A worker is gone when rq has no registration for it
(the runtime's supervisor removes a dead worker's at once; otherwise it expires). A live
worker moves a job from the list to the registry in milliseconds, so one still there
after seconds has no live worker; should a stalled worker start it after all, the job
runs twice and its second run finds the attempt's ledger started and dispatches nothing
(actors/jobs/dispatch.py).

The move is one transaction WATCHing the list, the registry and the job (the job still
in the state it was found in), so two workers sweeping at once move it once, and a
worker starting it meanwhile cancels the move.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

import redis
from rq import Queue, Worker
from rq.defaults import RQ_KEY_PREFIX
from rq.job import JobStatus

STRANDED_AFTER_S: Final = 5.0
SWEEP_EVERY_S: Final = 1.0
EXECUTION_PREFIX: Final = f"{RQ_KEY_PREFIX}:execution:"  # rq's Execution.key, by composite key


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
            for stranded in stranded_jobs(queue):
                key = (queue.key, stranded.job_id)
                seen.add(key)
                first = self._first_seen.setdefault(key, now)
                if now - first >= self.stranded_after_s and requeue(queue, stranded):
                    moved.append(stranded.job_id)
                    seen.discard(key)
        # ids gone from the lists are forgotten: the table holds only what is there now
        self._first_seen = {key: at for key, at in self._first_seen.items() if key in seen}
        return moved


@dataclass(frozen=True, slots=True)
class Stranded:
    """A job no live worker will run: its status then (`queued` in the intermediate list,
    or `started`), and the started registry's entries of its dead executions."""

    job_id: str
    status: str
    dead_executions: tuple[str, ...] = ()


def stranded_jobs(queue: Queue) -> list[Stranded]:
    """The jobs of `queue` that look stranded now (the sweep waits for a second look)."""
    connection: redis.Redis = queue.connection
    intermediate = {_text(i) for i in connection.lrange(queue.intermediate_queue_key, 0, -1)}
    executions: dict[str, list[str]] = {}
    registry = queue.started_job_registry
    for job_id, execution_id in registry.get_job_and_execution_ids(cleanup=False):
        executions.setdefault(job_id, []).append(execution_id)
    job_ids = sorted(intermediate | set(executions))
    if not job_ids:
        return []
    statuses = _statuses(connection, queue, job_ids)
    workers = _execution_workers(connection, executions)
    alive = _registered(connection, {name for name in workers.values() if name})
    found: list[Stranded] = []
    for job_id, status in zip(job_ids, statuses, strict=True):
        held = [f"{job_id}:{e}" for e in executions.get(job_id, [])]
        if any(workers.get(entry) is None or workers[entry] in alive for entry in held):
            continue  # a live worker holds it (or one rq cannot name: left alone)
        queued_there = status == JobStatus.QUEUED.value and job_id in intermediate
        started_by_dead = status == JobStatus.STARTED.value and bool(held)
        if queued_there or started_by_dead:
            found.append(Stranded(job_id, status, tuple(held)))
    return found


def _statuses(connection: redis.Redis, queue: Queue, job_ids: list[str]) -> list[str]:
    with connection.pipeline(transaction=False) as pipeline:
        for job_id in job_ids:
            pipeline.hget(queue.job_class.key_for(job_id), "status")
        return [_text(s) if s is not None else "" for s in pipeline.execute()]


def _execution_workers(
    connection: redis.Redis, executions: dict[str, list[str]]
) -> dict[str, str | None]:
    """Each started-registry entry (`job:execution`) and the worker that made it: "" when
    the execution's record is gone (it outlived its TTL: its worker stopped heartbeating),
    None when the record names no worker."""
    entries = [f"{job_id}:{e}" for job_id, ids in executions.items() for e in ids]
    if not entries:
        return {}
    with connection.pipeline(transaction=False) as pipeline:
        for entry in entries:
            pipeline.exists(f"{EXECUTION_PREFIX}{entry}")
            pipeline.hget(f"{EXECUTION_PREFIX}{entry}", "worker_name")
        replies = pipeline.execute()
    found: dict[str, str | None] = {}
    for index, entry in enumerate(entries):
        exists, name = replies[2 * index], replies[2 * index + 1]
        found[entry] = "" if not exists else (_text(name) if name else None)
    return found


def _registered(connection: redis.Redis, names: set[str]) -> set[str]:
    ordered = sorted(names)
    with connection.pipeline(transaction=False) as pipeline:
        for name in ordered:
            pipeline.exists(Worker.redis_worker_namespace_prefix + name)
        flags = pipeline.execute()
    return {name for name, flag in zip(ordered, flags, strict=True) if flag}


def requeue(queue: Queue, stranded: Stranded) -> bool:
    """Put a stranded job back at the end of its queue, `queued`, out of the intermediate
    list, its dead executions out of the started registry; False when it changed since
    it was found (a worker took it meanwhile, or another sweeper moved it)."""
    connection: redis.Redis = queue.connection
    source, registry = queue.intermediate_queue_key, queue.started_job_registry.key
    job_key = queue.job_class.key_for(stranded.job_id)
    with connection.pipeline() as pipeline:
        try:
            # a worker starting the job meanwhile writes these keys: the move is cancelled
            pipeline.watch(source, registry, job_key)  # type: ignore[no-untyped-call, unused-ignore]
            status = pipeline.hget(job_key, "status")
            if status is None or _text(status) != stranded.status:
                return False
            listed = pipeline.lpos(source, stranded.job_id) is not None
            if stranded.status == JobStatus.QUEUED.value and not listed:
                return False
            pipeline.multi()
            pipeline.lrem(source, 1, stranded.job_id)
            if stranded.dead_executions:
                pipeline.zrem(registry, *stranded.dead_executions)
            pipeline.hset(job_key, "status", JobStatus.QUEUED.value)
            pipeline.rpush(queue.key, stranded.job_id)
            pipeline.execute()
        except redis.WatchError:  # it changed: the next sweep looks again
            return False
    return True


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
