"""Issue 19, break 3: rq's scheduler died on a Redis blip and was restarted only by rq's
10-minute maintenance, so backstops sat overdue. Through a real rq worker subprocess (the
runtime's WorkerPool, no Ray) on a real embedded redis-server of its own, stopped and
started again while a backstop comes due: the backstop fires within 2 s of the restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from actors.clock import SystemClock
from actors.jobs.backstop_arming import BackstopArmer
from actors.jobs.queue import backstop_queue_name
from actors.jobs.workers import WorkerPool, wait_registered, worker_env
from actors.store.embedded import EmbeddedRedis
from actors.store.sync_reads import read_route
from tests.actors.conftest import unique_keys
from tests.actors.worker_waits import wait_for, waiting_route, workers_ready

pytestmark = pytest.mark.integration

HOST = "gone-host"  # no host runs: only the backstop can fire its routes
DELIVER = "tests.actors.fake_dispatcher:deliver"
DUE_IN_S = 3.0
AFTER_RESTART_S = 2.0  # the bound the issue asks for
GUARD_S = 30.0  # a guard against a hang only


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    embedded = EmbeddedRedis(tmp_path / "redis")
    embedded.start()
    yield embedded
    embedded.stop()


def test_a_backstop_due_while_redis_was_down_fires_within_2_s_of_its_restart(
    server: EmbeddedRedis, capsys: pytest.CaptureFixture[str]
) -> None:
    url, keys = server.url, unique_keys()
    queue = f"{keys.prefix}-dispatch"
    due = datetime.now(UTC) + timedelta(seconds=DUE_IN_S)
    deadline = waiting_route(url, keys, "s-1", due, HOST)
    armer = BackstopArmer(
        lambda: redis.Redis.from_url(url), queue, keys, HOST, DELIVER, clock=SystemClock()
    )
    [second] = armer.arm([deadline])
    job_due = second + armer.grace_s
    pool = WorkerPool(url, queue, count=1, name_prefix=f"{keys.prefix}-w", env=worker_env())
    pool.start()
    try:
        assert wait_registered(url, [w.name for w in pool.workers], GUARD_S)
        wait_for(lambda: workers_ready(url, pool, backstop_queue_name(queue)), GUARD_S)
        server.stop()  # Redis goes away before the backstop is due...
        wait_for(lambda: time.time() > job_due + 0.5, GUARD_S)
        server.start()  # ...and comes back after it is due
        restarted = time.monotonic()
        connection = redis.Redis.from_url(url)
        fired = wait_for(lambda: read_route(connection, keys, "s-1").state == "retrying", GUARD_S)
        connection.close()
    finally:
        pool.stop()
    delay = fired - restarted
    with capsys.disabled():
        print(f"\nbackstop fired {delay:.3f} s after the Redis restart")
    assert delay <= AFTER_RESTART_S
