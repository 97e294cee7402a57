"""Chaos bug B: a job a worker had moved to rq's intermediate list (its BLMOVE) and never
started (the worker died, or Redis restarted before it read the reply) stayed `queued`
there, where no worker takes it. The workers' sweep puts it back on its queue once it has
been there for seconds, and never touches a job a worker started or finished. On the
session's real Redis; the job's dequeue done by hand as a dying worker's would be."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
import redis
from rq import Queue, Worker
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from actors.jobs.rq_worker import PromptTeardownWorker
from actors.jobs.stranded import (
    STRANDED_AFTER_S,
    Stranded,
    StrandedSweep,
    requeue,
    stranded_jobs,
)
from actors.jobs.workers import WorkerPool, worker_env
from tests.actors.worker_waits import wait_for

pytestmark = pytest.mark.integration

GUARD_S = 60.0  # a guard against a hang only: the sweep moves it after STRANDED_AFTER_S


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def queue(redis_url: str) -> Iterator[Queue]:
    connection = redis.Redis.from_url(redis_url)
    made = Queue(f"stranded-{uuid.uuid4().hex[:8]}", connection=connection,
                 serializer=JSONSerializer)  # fmt: skip
    yield made
    made.empty()  # type: ignore[no-untyped-call, unused-ignore]  # rq's, untyped
    connection.delete(made.intermediate_queue_key)
    connection.close()


def dequeued_by_a_dying_worker(queue: Queue) -> Job:
    """A job enqueued, then moved to the intermediate list as rq's dequeue moves it."""
    job = queue.enqueue("operator.add", 1, 2)
    moved = queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    assert moved is not None
    assert _text(moved) == job.id
    return job


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def listed(queue: Queue) -> list[str]:
    return [_text(item) for item in queue.connection.lrange(queue.key, 0, -1)]


def intermediate(queue: Queue) -> list[str]:
    items = queue.connection.lrange(queue.intermediate_queue_key, 0, -1)
    return [_text(item) for item in items]


def test_a_stranded_job_goes_back_on_its_queue_after_the_grace_and_then_runs(
    queue: Queue,
) -> None:
    job = dequeued_by_a_dying_worker(queue)
    clock = Clock()
    sweep = StrandedSweep(clock)
    assert sweep.sweep([queue]) == []  # first seen: a live worker may be about to start it
    clock.now += STRANDED_AFTER_S - 0.1
    assert sweep.sweep([queue]) == []
    assert intermediate(queue) == [job.id]
    clock.now += 0.1
    assert sweep.sweep([queue]) == [job.id]
    assert (listed(queue), intermediate(queue)) == ([job.id], [])
    worker = PromptTeardownWorker([queue], connection=queue.connection, serializer=JSONSerializer)
    assert worker.work(burst=True)
    done = Job.fetch(job.id, connection=queue.connection, serializer=JSONSerializer)
    assert (done.get_status(), done.return_value()) == (JobStatus.FINISHED, 3)


def executed_by(job: Job, worker: str, *, started: bool) -> None:
    """What a worker writes as it takes the job: its execution in the started registry
    (prepare_execution), then, `started`, the job's status (prepare_job_execution, which
    also takes the id off the intermediate list)."""
    with job.connection.pipeline() as pipeline:
        Execution.create(job, ttl=60, pipeline=pipeline, worker_name=worker)
        if started:
            job.prepare_for_execution(worker, pipeline=pipeline)
            pipeline.lrem(Queue(job.origin, connection=job.connection).intermediate_queue_key,
                          1, job.id)  # fmt: skip
        pipeline.execute()


@pytest.fixture
def live_worker(queue: Queue) -> Iterator[str]:
    """A worker name rq has a registration for."""
    name = f"{queue.name}-alive"
    key = Worker.redis_worker_namespace_prefix + name
    queue.connection.hset(key, "birth", "now")
    yield name
    queue.connection.delete(key)


def test_a_job_a_live_worker_holds_or_one_finished_is_never_moved(
    queue: Queue, live_worker: str
) -> None:
    running = dequeued_by_a_dying_worker(queue)
    executed_by(running, live_worker, started=False)
    started = dequeued_by_a_dying_worker(queue)
    executed_by(started, live_worker, started=True)
    finished = dequeued_by_a_dying_worker(queue)
    finished.set_status(JobStatus.FINISHED)
    clock = Clock()
    sweep = StrandedSweep(clock)
    sweep.sweep([queue])
    clock.now += 10 * STRANDED_AFTER_S
    assert sweep.sweep([queue]) == []
    assert listed(queue) == []
    assert sorted(intermediate(queue)) == sorted([running.id, finished.id])
    assert started.get_status(refresh=True) == JobStatus.STARTED


@pytest.mark.parametrize("started", [False, True], ids=["taken", "started"])
def test_a_job_whose_worker_is_gone_goes_back_on_its_queue_and_runs(
    queue: Queue, started: bool
) -> None:
    """The worker made its execution (and, `started`, marked the job started) and died;
    the supervisor removed its registration (rq has none for it)."""
    job = dequeued_by_a_dying_worker(queue)
    executed_by(job, f"{queue.name}-gone", started=started)
    clock = Clock()
    sweep = StrandedSweep(clock)
    assert sweep.sweep([queue]) == []
    clock.now += STRANDED_AFTER_S
    assert sweep.sweep([queue]) == [job.id]
    assert (listed(queue), intermediate(queue)) == ([job.id], [])
    assert queue.started_job_registry.get_job_and_execution_ids(cleanup=False) == []
    assert job.get_status(refresh=True) == JobStatus.QUEUED
    worker = PromptTeardownWorker([queue], connection=queue.connection, serializer=JSONSerializer)
    assert worker.work(burst=True)
    assert job.return_value(refresh=True) == 3


def test_an_id_that_left_the_list_between_sweeps_starts_its_grace_again(queue: Queue) -> None:
    job = dequeued_by_a_dying_worker(queue)
    clock = Clock()
    sweep = StrandedSweep(clock)
    sweep.sweep([queue])
    queue.connection.lmove(queue.intermediate_queue_key, queue.key)  # taken back, say
    clock.now += STRANDED_AFTER_S
    assert sweep.sweep([queue]) == []
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)  # dequeued again now
    clock.now += 1
    assert sweep.sweep([queue]) == []  # a fresh dequeue has its whole grace
    clock.now += STRANDED_AFTER_S
    assert sweep.sweep([queue]) == [job.id]


def test_sweepers_racing_move_a_stranded_job_once(queue: Queue) -> None:
    job = dequeued_by_a_dying_worker(queue)
    [stranded] = stranded_jobs(queue)
    assert stranded == Stranded(job.id, JobStatus.QUEUED.value)
    start = threading.Barrier(8)
    results: list[bool] = []

    def move() -> None:
        start.wait()
        results.append(requeue(queue, stranded))

    threads = [threading.Thread(target=move) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 1, results
    assert (listed(queue), intermediate(queue)) == ([job.id], [])


def test_the_sweep_is_at_most_once_per_interval() -> None:
    clock = Clock()
    sweep = StrandedSweep(clock, every_s=1.0)
    assert sweep.due()
    sweep.sweep([])
    clock.now += 0.5
    assert not sweep.due()
    clock.now += 0.5
    assert sweep.due()


def test_a_runtime_worker_runs_a_job_left_stranded_by_a_dead_one(
    queue: Queue, redis_url: str
) -> None:
    """The sweep wired into the runtime's worker class: a real supervised worker process."""
    job = dequeued_by_a_dying_worker(queue)
    pool = WorkerPool(redis_url, queue.name, count=1, name_prefix=f"{queue.name}-w",
                      env=worker_env())  # fmt: skip
    pool.start()
    try:
        wait_for(lambda: job.get_status(refresh=True) == JobStatus.FINISHED, GUARD_S)
    finally:
        pool.stop()
    assert job.return_value(refresh=True) == 3
    assert intermediate(queue) == []


def test_a_death_whose_handling_failed_is_handled_again_next_round(
    queue: Queue, redis_url: str
) -> None:
    """Reconciliation after a worker's death can meet a Redis that is restarting; it ran
    once and was never tried again, leaving that worker's dispatch unsettled."""
    calls: list[str] = []

    def on_death(name: str) -> None:
        calls.append(name)
        if len(calls) == 1:
            raise redis.ConnectionError("Redis is restarting")

    pool = WorkerPool(
        redis_url, queue.name, count=1, name_prefix=f"{queue.name}-w", env=worker_env(),
        on_death=on_death, poll_s=3600, backstops=False,
    )  # fmt: skip
    pool.start()
    try:
        [worker] = pool.workers
        worker.process.kill()
        worker.process.wait()
        assert pool.supervise_once() == [worker.name]
        assert calls == [worker.name]
        assert pool.supervise_once() == []
        assert calls == [worker.name, worker.name]
        pool.supervise_once()
        assert calls == [worker.name, worker.name]  # settled: not called again
    finally:
        pool.stop()
