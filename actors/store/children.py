"""Child processes that die with this one: the embedded redis-server and the rq workers.

On Linux a child asks the kernel for DEATH_SIGNAL when its parent dies
(PR_SET_PDEATHSIG), so a `kill -9` of `recovery up` (or of any owner) leaves none of
them running. The death signal follows the thread that forked, not the process, so every
such child is started from one daemon thread that lives as long as the process
(`LAUNCHER`), never from the caller's thread, which may end first. Elsewhere the next
start reaps what is left (actors/store/embedded.py, actors/jobs/workers.py).
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Final, TypeVar

PR_SET_PDEATHSIG: Final = 1  # linux/prctl.h
DEATH_SIGNAL: Final = signal.SIGTERM

T = TypeVar("T")


def spawn_owned(args: Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(args, **popen)` started on the launcher thread, as a child that
    gets DEATH_SIGNAL when this process dies."""
    return LAUNCHER.run(
        lambda: subprocess.Popen(args, preexec_fn=death_signal(), **popen)  # noqa: PLW1509 - see death_signal
    )


def death_signal() -> Callable[[], None] | None:
    """On Linux, what the child runs before exec: ask for DEATH_SIGNAL when its parent
    dies, and exit if that already happened. It calls only libc, resolved here before the
    fork (Python's warning about preexec_fn in threads is about running Python code there)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(DEATH_SIGNAL), 0, 0, 0)
        if os.getppid() != parent:  # the owner died before the request took
            os._exit(1)

    return arm


class Launcher:
    """The process's launcher thread: a daemon thread that never ends before the process
    does (module docstring), running what it is given one at a time."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, call: Callable[[], T]) -> T:
        """`call()` on the launcher thread; its result, or its exception raised here."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # first use, or a fork
                self._thread = threading.Thread(
                    target=self._serve, name="child-launcher", daemon=True
                )
                self._thread.start()
        future: Future[T] = Future()
        self._jobs.put((call, future))
        return future.result()

    def _serve(self) -> None:
        while True:
            call, future = self._jobs.get()
            try:
                future.set_result(call())
            except BaseException as error:  # handed to the caller's thread
                future.set_exception(error)


LAUNCHER: Final = Launcher()
