"""The durable backstop of route timers: coalesced rq delayed jobs (docs/DESIGN.md §3 "Timers").

A route host arms a precise in-process timer per waiting route (actors/engine/timers.py); a
dead or wedged host fires none. The backstop is an rq delayed job on the backstop queue of
the runtime's dispatch queue (`<queue>-backstops`: its own supervised worker runs the
scheduler, and no dispatcher call can hold it up) that fires the host's due schedules
through the host's own fenced path, `RouteService.fire_due` over a RouteStore, and enqueues
the dispatch of every route that became `retrying`. Whichever fires first does the
transition; the other finds nothing to do.

Coalescing: one job per (key prefix, host, whole epoch second). A deadline `d` armed at
`now` is covered by second `s = max(ceil(d), floor(now) + 1)` — never a second that has
already begun, so the job relied on cannot be one that already ran — and that job is
scheduled at `s + grace` (default 1 s: the precise timer normally wins; rq scores are whole
seconds, polled every second). Its id hashes the marker key (rq ids allow only
`[A-Za-z0-9_-]`), so every process derives the same id. Arming a second costs nothing when
this process armed it already (an in-process memo), one pipelined SET NX when another
process did (the marker `keys.backstop(host, s)`, expiring MARKER_SLACK_S after the job's
time, i.e. once no one arms that second any more), and the rq enqueue only for the first
arm anywhere; that enqueue is rq's `unique` one, so a lost marker never schedules an id
twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import redis
from redis.exceptions import RedisError
from rq.exceptions import DuplicateJobError

from actors.clock import Clock
from actors.errors import RecoveryError, error_report, error_text
from actors.jobs.queue import backstop_queue_name, dispatch_queue
from actors.keys import KeySpace, valid_host_id
from actors.routes.models import WAITING_STATES, RouteSnapshot

JOB_FUNCTION: Final = "actors.jobs.backstop.run_backstop"
DEFAULT_GRACE_S: Final = 1
MARKER_SLACK_S: Final = 300
JOB_TIMEOUT_S: Final = 5 * 60
RESULT_TTL_S: Final = 600
FAILURE_TTL_S: Final = 7 * 24 * 3600
MEMO_PRUNE_EVERY_S: Final = 60
DRAIN_TIMEOUT_S: Final = 5.0

log = logging.getLogger(__name__)

Connect = Callable[[], redis.Redis]
"""A zero-argument source of the (blocking, rq-compatible) Redis client."""


def backstop_second(deadline: datetime, now: datetime) -> int:
    """The whole epoch second whose backstop covers `deadline` when armed at `now`."""
    return max(math.ceil(deadline.timestamp()), math.floor(now.timestamp()) + 1)


def backstop_job_id(keys: KeySpace, host_id: str, second: int) -> str:
    """The rq job id of a host's backstop for `second`: a hash of its marker key."""
    marker = keys.backstop(host_id, second)
    return "backstop-" + hashlib.sha256(marker.encode()).hexdigest()[:40]


class BackstopArmer:
    """Arms one host's backstop jobs (blocking redis-py, as rq is): `queue_name` is the
    dispatch queue; the jobs go to its backstop queue and dispatch to it.
    Safe to call from several threads; the memo only grows by seconds armed for sure."""

    def __init__(
        self,
        connect: Connect,
        queue_name: str,
        keys: KeySpace,
        host_id: str,
        dispatcher: str,
        *,
        clock: Clock,
        grace_s: int = DEFAULT_GRACE_S,
    ) -> None:
        if not isinstance(grace_s, int) or isinstance(grace_s, bool) or grace_s < 0:
            raise ValueError(f"grace_s must be a whole number of seconds >= 0, got {grace_s!r}")
        self.keys = keys
        self.host_id = valid_host_id(host_id)
        self.dispatcher = dispatcher
        self.queue_name = queue_name
        self.grace_s = grace_s
        self._connect = connect
        self._clock = clock
        self._armed: set[int] = set()
        self._pruned_at = 0
        self._lock = threading.Lock()

    def second_for(self, deadline: datetime) -> int:
        return backstop_second(deadline, self._clock.now())

    def is_armed(self, second: int) -> bool:
        with self._lock:
            return second in self._armed

    def arm(self, deadlines: Iterable[datetime]) -> list[int]:
        now = self._clock.now()
        return self.arm_seconds({backstop_second(deadline, now) for deadline in deadlines})

    def arm_seconds(self, seconds: Iterable[int]) -> list[int]:
        """Make sure each second has its backstop job; the seconds this call enqueued."""
        wanted = sorted(second for second in set(seconds) if not self.is_armed(second))
        if not wanted:
            return []
        now_s = math.floor(self._clock.now().timestamp())
        connection = self._connect()
        claimed = self._claim(connection, wanted, now_s)
        enqueued: list[int] = []
        for index, second in enumerate(claimed):
            try:
                if self._enqueue(connection, second):
                    enqueued.append(second)
            except RedisError:
                self._release(connection, claimed[index:])  # so a later arm tries again
                raise
        self._remember(wanted, now_s)
        return enqueued

    def _claim(self, connection: redis.Redis, seconds: Sequence[int], now_s: int) -> list[int]:
        """SET NX the markers in one round trip; the seconds no one had armed yet."""
        with connection.pipeline(transaction=False) as pipe:
            for second in seconds:
                ttl = max(0, second + self.grace_s - now_s) + MARKER_SLACK_S
                job_id = backstop_job_id(self.keys, self.host_id, second)
                pipe.set(self.keys.backstop(self.host_id, second), job_id, nx=True, ex=ttl)
            replies = pipe.execute()
        return [second for second, set_it in zip(seconds, replies, strict=True) if set_it]

    def _enqueue(self, connection: redis.Redis, second: int) -> bool:
        """Schedule the second's job on the backstop queue; False when rq already holds
        that id (its marker was lost), so it is armed all the same."""
        queue = dispatch_queue(connection, backstop_queue_name(self.queue_name))
        at = datetime.fromtimestamp(second + self.grace_s, UTC)
        options: dict[str, Any] = {
            "job_id": backstop_job_id(self.keys, self.host_id, second),
            "job_timeout": JOB_TIMEOUT_S, "result_ttl": RESULT_TTL_S,
            "failure_ttl": FAILURE_TTL_S, "unique": True,
        }  # fmt: skip
        args = (self.keys.prefix, self.host_id, second, self.dispatcher, self.queue_name)
        try:
            queue.enqueue_at(at, JOB_FUNCTION, *args, **options)
        except DuplicateJobError:
            return False
        return True

    def _release(self, connection: redis.Redis, seconds: Sequence[int]) -> None:
        try:
            connection.delete(*(self.keys.backstop(self.host_id, s) for s in seconds))
        except RedisError as error:  # the marker expires on its own
            log.warning(
                "backstop markers of host %s not released: %s", self.host_id, error_text(error)
            )

    def _remember(self, seconds: Iterable[int], now_s: int) -> None:
        with self._lock:
            self._armed.update(seconds)
            if now_s - self._pruned_at >= MEMO_PRUNE_EVERY_S:  # past seconds are never armed
                self._armed = {second for second in self._armed if second > now_s}
                self._pruned_at = now_s


class HostBackstops:
    """A host's side: `cover` is cheap and never blocks the event loop; the seconds it
    needs are armed in batches in a worker thread, and a failure there is only logged
    (the precise timer, rehydration and reconciliation remain)."""

    def __init__(self, armer: BackstopArmer) -> None:
        self.armer = armer
        self._pending: set[int] = set()
        self._flushing: asyncio.Task[None] | None = None

    def cover_snapshot(self, snapshot: RouteSnapshot) -> None:
        if snapshot.state in WAITING_STATES and snapshot.deadline is not None:
            self.cover(snapshot.deadline)

    def cover(self, deadline: datetime) -> None:
        second = self.armer.second_for(deadline)
        if self.armer.is_armed(second):
            return
        self._pending.add(second)
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def flushed(self) -> None:
        """Wait until every second covered so far has been through an arming attempt."""
        while self._flushing is not None and not self._flushing.done():
            await asyncio.shield(self._flushing)

    async def aclose(self) -> None:
        try:
            await asyncio.wait_for(self.flushed(), DRAIN_TIMEOUT_S)
        except TimeoutError:
            log.warning("backstops of host %s still arming at close", self.armer.host_id)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, set()
            try:
                await asyncio.to_thread(self.armer.arm_seconds, batch)
            except (RedisError, RecoveryError) as error:
                log.warning(
                    "backstops of host %s not armed: %s", self.armer.host_id, error_text(error)
                )
            except Exception as error:  # never let arming take the host down
                host = self.armer.host_id
                log.error("arming backstops of host %s failed: %s", host, error_report(error))
