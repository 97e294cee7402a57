"""A stopping rq worker must not wait out its pubsub thread's 60 s read (rq 3.0 with
redis-py 8): a burst worker on an empty queue was seen taking 60.02 s to return, one run in
about ten. The race is made certain here: the thread reads the reply to the worker's
UNSUBSCRIBE before the worker stops it. rq's SimpleWorker then waits the thread's whole
read out (checked by hand: this test fails on it, in 60 s); the runtime's worker returns
at once. Real Redis, no Ray."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from rq import Queue

from actors.jobs.rq_worker import PromptTeardownWorker, RecoveryWorker
from tests.actors.worker_waits import wait_for

pytestmark = pytest.mark.integration

GUARD_S = 10.0  # far under rq's 60 s read, far over a prompt teardown


@pytest.fixture
def connection(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.mark.parametrize("worker_class", [PromptTeardownWorker, RecoveryWorker])
def test_unsubscribing_returns_at_once_when_the_thread_reads_the_reply_first(
    connection: redis.Redis, worker_class: type[PromptTeardownWorker]
) -> None:
    queue = Queue(f"teardown-{uuid.uuid4().hex[:8]}", connection=connection)
    worker = worker_class([queue], connection=connection)
    worker.subscribe()  # type: ignore[no-untyped-call]  # rq ships no annotations here
    pubsub, thread = worker.pubsub, worker.pubsub_thread
    assert pubsub is not None
    assert isinstance(thread, threading.Thread)
    wait_for(lambda: pubsub.subscribed, GUARD_S)
    sent = pubsub.unsubscribe

    def then_read_by_the_thread(*channels: str) -> None:
        sent(*channels)
        # The race, made certain: the thread takes the reply before the worker stops it
        # (once it has, with no channel left, its next read waits for a subscription).
        wait_for(lambda: not pubsub.subscribed, GUARD_S)

    pubsub.unsubscribe = then_read_by_the_thread
    started = time.monotonic()
    worker.unsubscribe()
    took = time.monotonic() - started

    assert took < GUARD_S, f"unsubscribe took {took:.1f} s"
    assert not thread.is_alive()


def test_a_burst_worker_on_an_empty_queue_returns_at_once(connection: redis.Redis) -> None:
    """What the race cost users: each of these would have taken 60 s when it hit."""
    queue = Queue(f"teardown-{uuid.uuid4().hex[:8]}", connection=connection)
    for _ in range(5):
        started = time.monotonic()
        RecoveryWorker([queue], connection=connection).work(burst=True, with_scheduler=False)
        assert time.monotonic() - started < GUARD_S
