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
from rq import Queue, SimpleWorker
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from actors.jobs.stranded import STRANDED_AFTER_S, StrandedSweep, requeue

pytestmark = pytest.mark.integration


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
    made.empty()  # type: ignore[no-untyped-call]  # rq leaves Queue.empty unannotated
    connection.delete(made.intermediate_queue_key)
    connection.close()


def dequeued_by_a_dying_worker(queue: Queue) -> Job:
    """A job enqueued, then moved to the intermediate list as rq's dequeue moves it."""
    job = queue.enqueue("operator.add", 1, 2)
    moved = queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    assert moved is not None
    assert text(moved) == job.id
    return job


def text(item: bytes | str) -> str:
    """A reply of rq's connection (bytes: it does not decode responses) as text."""
    return item.decode() if isinstance(item, bytes) else item


def listed(queue: Queue) -> list[str]:
    return [text(item) for item in queue.connection.lrange(queue.key, 0, -1)]


def intermediate(queue: Queue) -> list[str]:
    items = queue.connection.lrange(queue.intermediate_queue_key, 0, -1)
    return [text(item) for item in items]


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
    worker = SimpleWorker([queue], connection=queue.connection, serializer=JSONSerializer)
    assert worker.work(burst=True)
    done = Job.fetch(job.id, connection=queue.connection, serializer=JSONSerializer)
    assert (done.get_status(), done.return_value()) == (JobStatus.FINISHED, 3)


def test_a_job_a_worker_started_or_finished_is_never_moved(queue: Queue) -> None:
    running = dequeued_by_a_dying_worker(queue)
    with queue.connection.pipeline() as pipeline:  # what a worker's prepare_execution writes
        Execution.create(running, ttl=60, pipeline=pipeline, worker_name="alive")
        pipeline.execute()
    finished = dequeued_by_a_dying_worker(queue)
    finished.set_status(JobStatus.FINISHED)
    clock = Clock()
    sweep = StrandedSweep(clock)
    sweep.sweep([queue])
    clock.now += 10 * STRANDED_AFTER_S
    assert sweep.sweep([queue]) == []
    assert listed(queue) == []
    assert sorted(intermediate(queue)) == sorted([running.id, finished.id])


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
    start = threading.Barrier(8)
    results: list[bool] = []

    def move() -> None:
        start.wait()
        results.append(requeue(queue, job.id))

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
