"""Chaos found an rq scheduler left running after its worker was killed: rq forks the
scheduler from the worker, and a scheduler whose worker died was re-parented to init and
heartbeated its lock for good. It stops once its worker is gone and releases the lock, so
the worker's replacement schedules in its place. A real backstop worker (no pool, whose
supervisor would kill the worker's process group and hide the leak) on the session's
real Redis."""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator

import psutil  # type: ignore[import-untyped]  # ships no stubs
import pytest
import redis

from actors.jobs.workers import worker_command, worker_env, worker_process_env
from tests.actors.worker_waits import wait_for

pytestmark = pytest.mark.integration

GUARD_S = 30.0  # a guard against a hang only


@pytest.fixture
def queue() -> str:
    return f"outlived-{uuid.uuid4().hex[:8]}-backstops"


@pytest.fixture
def worker(redis_url: str, queue: str) -> Iterator[subprocess.Popen[bytes]]:
    name = f"outlived-{uuid.uuid4().hex[:8]}"
    process = subprocess.Popen(
        worker_command(queue, name, scheduler=True),
        env=worker_process_env(worker_env(), redis_url), start_new_session=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    yield process
    for found in [*_children(process.pid), _process(process.pid)]:
        if found is not None:
            found.kill()
    process.wait()


def test_a_scheduler_whose_worker_was_killed_stops_and_releases_its_lock(
    redis_url: str, queue: str, worker: subprocess.Popen[bytes]
) -> None:
    connection = redis.Redis.from_url(redis_url)
    lock = f"rq:scheduler-lock:{queue}"
    wait_for(lambda: bool(connection.exists(lock)) and bool(_children(worker.pid)), GUARD_S)
    [scheduler] = _children(worker.pid)

    worker.send_signal(signal.SIGKILL)  # the worker alone: its scheduler is not signalled
    worker.wait()

    _, alive = psutil.wait_procs([scheduler], timeout=GUARD_S)
    for left in alive:  # never leave one behind, even when the test fails
        left.kill()
    assert alive == [], f"the scheduler (pid {scheduler.pid}) outlived its worker"
    assert not connection.exists(lock), "the stopped scheduler left its lock held"
    connection.close()


def _children(pid: int) -> list[psutil.Process]:
    found = _process(pid)
    return found.children() if found is not None else []


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None
