"""The rq workers of a runtime: their own processes, spawned and supervised here.

rq installs signal handlers and forks a work horse per job, which does not fit inside a
Ray actor (docs/DESIGN.md §3), so the runtime runs `count` plain `rq worker` processes (the
same interpreter and venv, JSON serializer) on its dispatch queue, and one more on its
backstop queue with the scheduler (actors/jobs/rq_worker.py supervises it), so a hung
dispatcher never delays a timer's backstop. They run a SimpleWorker class: the job runs
in the worker process itself. rq's
default Worker forks a work horse per job and puts it in a process group of its own, so
a worker that dies leaves its horse running unseen (and still able to dispatch); with a
SimpleWorker the death of the worker is the end of its dispatch, and stopping the worker
(its own session here) leaves nothing behind.

A supervisor thread polls the processes. When one has died it forgets the dead worker's
rq registration (rq would keep it for its worker TTL, ~7 min, and the dispatch ledger
would take a dispatch the dead worker started for one still running), calls `on_death`
(the runtime reconciles there: the dead worker's started dispatches become
`action_required`) and starts a new worker in its place.

`stop()` sends SIGTERM to every worker's process group (rq finishes nothing more: a warm
shutdown lets the running job end), waits, and sends SIGKILL after the timeout.

Workers import `actors` (and the dispatcher) as the process that starts them does. From a
checkout the folder holding `actors` goes on their PYTHONPATH; from an installed wheel that
folder is site-packages, which the interpreter searches anyway, so it is left out (on
PYTHONPATH it would come before the standard library). Workers run in the starting
process's working folder, as `rq worker` run there by hand would: relative paths mean the
same in both, and no worker runs inside site-packages (rq puts its working folder on
`sys.path`, and site-packages may be read-only).

The Redis URL (its password with it) reaches a worker through its environment
(`RQ_REDIS_URL`, which `rq worker` reads like `--url`), never its command line: any user
can read `/proc/PID/cmdline`, while `/proc/PID/environ` is its owner's alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import site
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Self

import redis
from rq import Worker
from rq.worker_registration import REDIS_WORKER_KEYS, WORKERS_BY_QUEUE_KEY

from actors.engine.config import DEFAULT_WORKER_COUNT
from actors.errors import error_report, error_text
from actors.jobs.queue import backstop_queue_name
from actors.jobs.rq_worker import WORKER_CLASS
from actors.store.children import spawn_owned

SUPERVISE_POLL_S: Final = 0.2
STOP_TIMEOUT_S: Final = 10.0
STOP_POLL_S: Final = 0.02
SERIALIZER: Final = "rq.serializers.JSONSerializer"
URL_ENV: Final = "RQ_REDIS_URL"  # read by `rq worker` (its --url option's variable)
# The folder holding the `actors` package (the checkout, or site-packages when installed):
# workers import the dispatch job from it.
PROJECT_ROOT: Final = Path(__file__).resolve().parents[2]

log = logging.getLogger(__name__)

OnDeath = Callable[[str], None]
"""Called with the name of a worker found dead, before it is replaced."""


def worker_command(queue: str, name: str, *, scheduler: bool = False) -> list[str]:
    """The `rq worker` command line of one supervised worker: no Redis URL on it (the
    worker reads it from URL_ENV in its environment, see worker_process_env). Only the
    backstop worker runs the scheduler (dispatch jobs are never delayed)."""
    with_scheduler = ["--with-scheduler"] if scheduler else []
    return [
        sys.executable, "-m", "rq.cli", "worker", "--serializer", SERIALIZER,
        "--worker-class", WORKER_CLASS, *with_scheduler, "--name", name, "--quiet", queue,
    ]  # fmt: skip


def worker_process_env(env: Mapping[str, str], url: str) -> dict[str, str]:
    """`env` with the Redis URL the worker connects to (URL_ENV)."""
    return {**env, URL_ENV: url}


def site_folders() -> frozenset[Path]:
    """The folders this interpreter searches for installed packages without PYTHONPATH."""
    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return frozenset(Path(folder).resolve() for folder in folders)


def worker_env(extra_paths: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment with the project (and `extra_paths`) importable: the
    project's folder is added unless it is one the interpreter searches anyway."""
    env = dict(os.environ)
    paths = [*extra_paths]
    if PROJECT_ROOT not in site_folders():
        paths.insert(0, str(PROJECT_ROOT))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def forget_worker(connection: redis.Redis, name: str, queue: str) -> None:
    """Remove a dead worker's rq registration, so no one counts it as alive."""
    key = Worker.redis_worker_namespace_prefix + name
    with connection.pipeline() as pipeline:
        pipeline.srem(REDIS_WORKER_KEYS, key)
        pipeline.srem(WORKERS_BY_QUEUE_KEY % queue, key)
        pipeline.delete(key)
        pipeline.execute()


@dataclass
class DeadWorker:
    """A worker that died, and whether its rq registration was removed yet."""

    name: str
    queue: str
    forgotten: bool = False


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    queue: str = ""
    scheduler: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal_group(self, number: signal.Signals) -> None:
        """Signal the worker and its work horse (its own process group)."""
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(self.process.pid, number)


class WorkerPool:
    """`count` supervised rq workers on dispatch queue `queue` of the Redis at `url`, and
    (with `backstops`) one more on its backstop queue, which runs the scheduler: a hung
    dispatcher holds a dispatch worker, never a timer's backstop."""

    def __init__(
        self,
        url: str,
        queue: str,
        *,
        count: int = DEFAULT_WORKER_COUNT,
        name_prefix: str = "recovery",
        extra_paths: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        on_death: OnDeath | None = None,
        poll_s: float = SUPERVISE_POLL_S,
        backstops: bool = True,
    ) -> None:
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        self.url = url
        self.queue = queue
        self.count = count
        self.backstops = backstops
        self.name_prefix = name_prefix
        self.restarts = 0
        self._env = dict(env) if env is not None else worker_env(extra_paths)
        self._on_death = on_death
        self._poll_s = poll_s
        self._workers: list[WorkerProcess] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        # dead workers whose registration or death handling met a Redis error: tried again
        # every round until both are done (their dispatches are settled only then)
        self._unsettled: dict[str, DeadWorker] = {}

    @property
    def workers(self) -> list[WorkerProcess]:
        with self._lock:
            return list(self._workers)

    def start(self) -> Self:
        with self._lock:
            self._workers = [self._spawn(self.queue) for _ in range(self.count)]
            if self.backstops:
                self._workers.append(self._spawn(backstop_queue_name(self.queue), scheduler=True))
        self._stopping.clear()
        self._thread = threading.Thread(target=self._supervise, name="rq-supervisor", daemon=True)
        self._thread.start()
        return self

    def supervise_once(self) -> list[str]:
        """Replace every worker that has died, and settle the deaths not settled yet
        (forget its registration, then `on_death`); the names of the newly dead ones."""
        dead: list[str] = []
        with self._lock:
            for index, worker in enumerate(self._workers):
                if worker.alive() or self._stopping.is_set():
                    continue
                worker.signal_group(signal.SIGKILL)  # anything left in its session
                dead.append(worker.name)
                self._unsettled[worker.name] = DeadWorker(worker.name, worker.queue)
                self._workers[index] = self._spawn(worker.queue, scheduler=worker.scheduler)
                self.restarts += 1
                log.warning("rq worker %s died (pid %d); restarted", worker.name, worker.pid)
            for name, death in list(self._unsettled.items()):
                if self._stopping.is_set():
                    break
                death.forgotten = death.forgotten or self._forget(death.name, death.queue)
                if death.forgotten and self._notify(death.name):
                    del self._unsettled[name]
        return dead

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop supervising, SIGTERM every worker, SIGKILL what is left after the timeout."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for worker in workers:
            try:
                worker.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("rq worker %s ignored SIGTERM; killing it", worker.name)
            worker.signal_group(signal.SIGKILL)  # the group: a horse left behind too
            worker.process.wait()
            self._forget(worker.name, worker.queue)

    def _supervise(self) -> None:
        while not self._stopping.wait(self._poll_s):
            try:
                self.supervise_once()
            except Exception as error:  # keep supervising whatever one round met
                log.error("rq worker supervision failed; trying again: %s", error_report(error))

    def _spawn(self, queue: str, *, scheduler: bool = False) -> WorkerProcess:
        kind = "backstop-" if scheduler else ""
        name = f"{self.name_prefix}-{kind}{uuid.uuid4().hex[:12]}"
        process = spawn_owned(  # a worker dies with the process that owns the pool
            worker_command(queue, name, scheduler=scheduler),
            env=worker_process_env(self._env, self.url), start_new_session=True,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        return WorkerProcess(name, process, queue, scheduler)

    def _forget(self, name: str, queue: str) -> bool:
        """Whether the dead worker's registration is gone (False: Redis refused)."""
        try:
            connection = redis.Redis.from_url(self.url)
            try:
                forget_worker(connection, name, queue)
            finally:
                connection.close()
        except redis.RedisError as error:
            log.warning("cannot forget rq worker %s yet: %s", name, error_text(error))
            return False
        return True

    def _notify(self, name: str) -> bool:
        """Whether `on_death` ran through (False: it raised; tried again next round)."""
        if self._on_death is None:
            return True
        try:
            self._on_death(name)
        except Exception as error:
            log.error("handling the death of rq worker %s failed, trying again: %s", name,
                      error_report(error))  # fmt: skip
            return False
        return True


def wait_registered(url: str, names: list[str], timeout_s: float) -> bool:
    """Whether every named worker registered with rq within `timeout_s` (polling)."""
    keys = {Worker.redis_worker_namespace_prefix + name for name in names}
    connection = redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            members = {_text(m) for m in connection.smembers(REDIS_WORKER_KEYS)}
            if keys <= members:
                return True
            time.sleep(STOP_POLL_S)
        return False
    finally:
        connection.close()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
