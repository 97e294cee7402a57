"""The rq worker class the runtime's workers run: rq's SimpleWorker whose scheduler
survives Redis going away (issue 19, break 3).

rq's scheduler is a process forked by the worker; its loop has no error handling, so a
Redis restart kills it, and rq starts it again only in the worker's maintenance round,
every 10 minutes: backstops sat overdue that long. Here:

- the scheduler's loop (`SupervisedScheduler.work`) survives a Redis error: it logs once
  per outage and tries again every RETRY_S, so once Redis is back the due jobs are
  enqueued within RETRY_S + one loop;
- the scheduler stops (releasing its locks) once the worker that forked it is gone: a
  worker killed with SIGKILL left its scheduler running for good, parented to init,
  heartbeating the locks its replacement needed;
- the worker starts its scheduler whenever it is not running (it died, or a lock left by
  a killed worker's scheduler, which expires after 61 s, kept it from starting) every
  time its main loop turns, and its blocking dequeue returns every DEQUEUE_TIMEOUT_S so
  an idle worker turns too;
- the worker waits a Redis outage out where rq's would quit (its suspension check), and
  its reconnect backoff is capped at MAX_RECONNECT_WAIT_S (rq's grows to 60 s during a
  long outage, and the job the scheduler enqueued would wait that long).

Run as `rq worker --worker-class actors.jobs.rq_worker.RecoveryWorker` (actors/jobs/workers.py).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Final

from redis import exceptions as redis_errors
from redis.exceptions import RedisError
from rq.scheduler import RQScheduler
from rq.worker import SimpleWorker

from actors.errors import error_text
from actors.jobs.stranded import StrandedSweep

RETRY_S: Final = 0.2
DEQUEUE_TIMEOUT_S: Final = 5
MAX_RECONNECT_WAIT_S: Final = 1.0
WORKER_CLASS: Final = "actors.jobs.rq_worker.RecoveryWorker"

log = logging.getLogger(__name__)


class SupervisedScheduler(RQScheduler):
    """rq's scheduler, with a loop that outlives Redis errors and ends with its worker."""

    _owner = 0  # the pid of the worker that forked this scheduler

    def start(self) -> Any:
        self._owner = os.getpid()  # read in the forked child: its parent must stay this one
        return super().start()

    @property
    def orphaned(self) -> bool:
        """The worker that forked this scheduler is gone (the child was re-parented)."""
        return os.getppid() != self._owner

    def work(self) -> None:
        self._install_signal_handlers()
        self._until_registered()
        failing = False
        while not self._stop_requested and not self.orphaned:
            try:
                if self.should_reacquire_locks:
                    self.acquire_locks()
                self.heartbeat()
                self.enqueue_scheduled_jobs()
            except RedisError as error:
                if not failing:
                    log.warning("rq scheduler: Redis failed, retrying: %s", error_text(error))
                failing = True
                self._scheduled_job_registries = []  # prepared again once Redis is back
                time.sleep(RETRY_S)
                continue
            if failing:
                log.warning("rq scheduler: Redis is back, scheduling again")
            failing = False
            time.sleep(self.interval)
        self.stop()

    def stop(self) -> None:
        try:
            super().stop()
        except RedisError as error:  # its locks expire on their own
            log.warning("rq scheduler stopped without releasing its locks: %s", error_text(error))

    def _until_registered(self) -> None:
        while not self._stop_requested and not self.orphaned:
            try:
                self.register_birth()
            except RedisError:
                time.sleep(RETRY_S)
                continue
            return


class PromptTeardownWorker(SimpleWorker):
    """rq's SimpleWorker whose teardown does not wait out its pubsub thread's read.

    rq (3.0) sends UNSUBSCRIBE, then stops its pubsub thread and (with redis-py 8) waits for
    it, while the thread blocks up to 60 s reading the next message. When the thread had
    already taken the UNSUBSCRIBE's reply before the stop, that read found nothing: a burst
    worker's `work()` (and a stopping worker) took 60 s. Its loop is ended first here, so
    the UNSUBSCRIBE's reply is the last message it reads."""

    def unsubscribe(self) -> None:
        thread = self.pubsub_thread
        if thread is not None:
            try:
                thread.stop(timeout=0)
            except TypeError:  # redis-py before 8: stop() only clears the flag
                thread.stop()
        super().unsubscribe()


class RecoveryWorker(PromptTeardownWorker):
    """A SimpleWorker (the job runs in the worker process) whose scheduler is supervised."""

    max_connection_wait_time = MAX_RECONNECT_WAIT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stranded = StrandedSweep(time.monotonic)

    @property
    def dequeue_timeout(self) -> int:
        return min(int(super().dequeue_timeout), DEQUEUE_TIMEOUT_S)

    def check_for_suspension(self, burst: bool) -> None:
        """rq's, waiting out a Redis outage: rq's worker quits on a connection error here
        (outside its dequeue's retry loop), and a new one could not start before Redis is
        back, so jobs due meanwhile would wait for a new worker to boot."""
        while True:
            try:
                super().check_for_suspension(burst)
            except (redis_errors.ConnectionError, redis_errors.TimeoutError) as error:
                if self._stop_requested:
                    return
                log.warning("rq worker %s: Redis away, waiting: %s", self.name, error_text(error))
                time.sleep(RETRY_S)
                continue
            return

    @property
    def should_run_maintenance_tasks(self) -> bool:
        self.revive_scheduler()
        self.sweep_stranded()
        return bool(super().should_run_maintenance_tasks)

    def sweep_stranded(self) -> None:
        """Put the jobs stranded in this worker's queues' intermediate lists back on their
        queues (actors/jobs/stranded.py); at most once a second, at a turn of the loop."""
        if self._stop_requested or not self.stranded.due():
            return
        try:
            moved = self.stranded.sweep(self.queues)
        except RedisError as error:
            log.warning("rq worker %s: stranded sweep postponed: %s", self.name, error_text(error))
            return
        for job_id in moved:
            log.warning("rq worker %s: job %s was stranded after its dequeue; queued again",
                        self.name, job_id)  # fmt: skip

    def run_maintenance_tasks(self) -> None:
        """rq's, tried again next round when Redis fails (rq's worker would quit)."""
        try:
            super().run_maintenance_tasks()
        except RedisError as error:
            log.warning("rq worker %s: maintenance postponed: %s", self.name, error_text(error))

    def revive_scheduler(self) -> None:
        """Start the scheduler if it is not running: it died, or another's lock (say, of a
        worker that was killed) kept it from starting; tried at every turn of the loop."""
        scheduler = self.scheduler
        if scheduler is None or self._stop_requested:  # shutting down: it was told to stop
            return
        if scheduler._process is not None and scheduler._process.is_alive():
            return
        try:
            scheduler.acquire_locks(auto_start=True)
        except RedisError:
            return  # the next turn tries again
        if scheduler._process is not None:
            log.warning("rq worker %s: its scheduler runs again", self.name)

    def _start_scheduler(
        self,
        burst: bool = False,
        logging_level: str | None = "INFO",
        *args: Any,
        **kwargs: Any,
    ) -> None:
        """rq's, with a SupervisedScheduler."""
        self.scheduler = SupervisedScheduler(
            self.queues, connection=self.connection, serializer=self.serializer,
            logging_level=logging_level if logging_level is not None else self.log.level,
        )  # fmt: skip
        self.scheduler.acquire_locks()
        if not self.scheduler.acquired_locks:
            return
        if not burst:
            self.scheduler.start()
            return
        try:
            self.scheduler.register_birth()
            self.scheduler.enqueue_scheduled_jobs()
        finally:
            self.scheduler.release_locks()
            self.scheduler.register_death()
