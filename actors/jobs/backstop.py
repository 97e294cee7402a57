"""The durable backstop job (docs/DESIGN.md §3 "Timers"); actors/jobs/backstop_arming.py arms it.

The job, `run_backstop(prefix, host_id, second, dispatcher, queue)`: reads the schedules of the
host's routes (its index set `keys.host_routes(host)` against the schedules zset) up to
`max(second, now)`, fires every one whose deadline has come and enqueues its dispatch
(`enqueue_dispatch`: the ledger and the job id make a repeat harmless). If some with a
deadline at or before `second` are not due yet (rq ran it early: clocks differ between
processes) or a fire failed, it arms the next second — always a later one, never a hot
loop. A late or duplicate run is a no-op: `fire_due` is fenced on (generation, ordinal) and
the deadline. Imports stay light (no Ray): the job runs in an rq worker.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import redis
from rq import get_current_job

from actors.clock import Clock
from actors.errors import CorruptRouteError, InvalidRouteIdError
from actors.jobs.backstop_arming import BackstopArmer
from actors.jobs.queue import dispatch_queue, enqueue_dispatch
from actors.jobs.worker_engine import WorkerEngine, worker_engine
from actors.keys import KeySpace
from actors.routes.commands import FireDue
from actors.routes.models import RouteSnapshot, ScheduleEntry, attempt_retrying
from actors.routes.quarantine import quarantine_of
from actors.store.replies import reply_text, reply_texts
from actors.store.route_codec import decode_schedule

READ_BATCH: Final = 500

log = logging.getLogger(__name__)

_Item = TypeVar("_Item")


@dataclass(frozen=True, slots=True)
class BackstopReport:
    """What one backstop run did. `fired`: routes left `retrying` at the scheduled attempt;
    `early`: schedules at or before its second not due yet; `rearmed`: the second armed."""

    fired: tuple[str, ...] = ()
    dispatched: tuple[str, ...] = ()
    early: int = 0
    failed: int = 0
    rearmed: int | None = None

    def as_result(self) -> dict[str, Any]:
        """The job's return value (rq stores it with the JSON serializer)."""
        return {
            "fired": list(self.fired), "dispatched": list(self.dispatched),
            "early": self.early, "failed": self.failed, "rearmed": self.rearmed,
        }  # fmt: skip


def run_backstop(
    prefix: str, host_id: str, second: int, dispatcher: str, queue: str | None = None
) -> dict[str, Any]:
    """The rq job: fire host `host_id`'s due schedules and dispatch them on dispatch queue
    `queue` (None, from a job armed before backstops had their own queue: its own)."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("run_backstop runs as an rq job")
    report = fire_backstop(
        job.connection, queue or job.origin, KeySpace(prefix), host_id, second,
        dispatcher=dispatcher,
    )  # fmt: skip
    return report.as_result()


def fire_backstop(
    connection: redis.Redis,
    queue_name: str,
    keys: KeySpace,
    host_id: str,
    second: int,
    *,
    dispatcher: str,
    clock: Clock | None = None,
) -> BackstopReport:
    """What a backstop job does, on `connection`, at `clock`'s time (None: the worker's
    engine and its clock, the wall clock); `queue_name` is the dispatch queue."""
    engine = worker_engine(connection, keys, clock=clock)
    clock = engine.clock
    now = clock.now()
    until = max(float(second), now.timestamp())
    entries, corrupt = host_schedules_and_corrupt(connection, keys, host_id, until)
    if corrupt:  # each its own quarantine; the healthy ones fire all the same
        engine.commands(host_id, [(error.route_id, quarantine_of(error)) for error in corrupt])
    due = [entry for entry in entries if entry.deadline <= now]
    early = sum(1 for e in entries if e.deadline > now and e.deadline.timestamp() <= second)
    fired, failed = _fire_due(engine, host_id, due)
    queue = dispatch_queue(connection, queue_name)
    dispatched = tuple(
        snapshot.route_id
        for snapshot in fired
        if enqueue_dispatch(
            queue, keys, snapshot.attempt, dispatcher=dispatcher, now=now, host_id=host_id,
            timeout_s=engine.settings.dispatch_timeout_s, redeliveries=snapshot.redeliveries,
        ) is not None
    )  # fmt: skip
    rearmed = None
    if early or failed:
        rearmed = max(second + 1, math.floor(now.timestamp()) + 1)
        armer = BackstopArmer(
            lambda: connection, queue_name, keys, host_id, dispatcher, clock=clock
        )
        armer.arm_seconds([rearmed])
    fired_ids = tuple(snapshot.route_id for snapshot in fired)
    return BackstopReport(fired_ids, dispatched, early, failed, rearmed)


def _fire_due(
    engine: WorkerEngine, host_id: str, due: Sequence[ScheduleEntry]
) -> tuple[list[RouteSnapshot], int]:
    """Fire the entries through the engine, as the host's timers would (one batch, for the
    host's routes); (routes left retrying at the scheduled attempt, failures)."""
    if not due:
        return [], 0
    items = [(entry.route_id, FireDue(entry.generation, entry.ordinal)) for entry in due]
    fired: list[RouteSnapshot] = []
    failed = 0
    for entry, outcome in zip(due, engine.commands(host_id, items), strict=True):
        if isinstance(outcome, Exception):  # Redis trouble: the next second tries again
            log.warning("backstop could not fire route %s: %s", entry.route_id, outcome)
            failed += 1
        elif attempt_retrying(outcome, entry.fence):
            fired.append(outcome)
    return fired, failed


def host_schedules(
    connection: redis.Redis, keys: KeySpace, host_id: str, until: float
) -> list[ScheduleEntry]:
    """The pending schedules of the routes in the host's index set with a deadline at or
    before `until` (epoch seconds), earliest first."""
    return host_schedules_and_corrupt(connection, keys, host_id, until)[0]


def host_schedules_and_corrupt(
    connection: redis.Redis, keys: KeySpace, host_id: str, until: float
) -> tuple[list[ScheduleEntry], list[CorruptRouteError]]:
    """`host_schedules`, and those of its schedules that cannot be decoded."""
    members = [reply_text(m) for m in connection.zrangebyscore(keys.schedules, "-inf", repr(until))]
    owned: list[str] = []
    for chunk in _chunks(members, READ_BATCH):
        flags = connection.smismember(keys.host_routes(host_id), list(chunk))
        owned += [member for member, flag in zip(chunk, flags, strict=True) if flag]
    entries: list[ScheduleEntry] = []
    corrupt: list[CorruptRouteError] = []
    for chunk in _chunks(owned, READ_BATCH):
        names: list[tuple[str, str]] = []
        with connection.pipeline(transaction=False) as pipe:
            for route_id in chunk:
                try:
                    names.append((route_id, keys.schedule(route_id)))
                except InvalidRouteIdError:
                    continue  # never written by a store; never turned into a key
                pipe.hgetall(names[-1][1])
            hashes = pipe.execute()
        for (route_id, name), raw in zip(names, hashes, strict=True):
            if not raw:  # cleared between the reads: it is not pending
                continue
            try:
                entries.append(decode_schedule(reply_texts(raw), route_id, name))
            except CorruptRouteError as error:
                log.warning("corrupt schedule of route %s: %s", route_id, error.reason)
                corrupt.append(error)
    return entries, corrupt


def _chunks(items: Sequence[_Item], size: int) -> Iterable[Sequence[_Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
