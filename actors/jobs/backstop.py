"""The durable backstop job (docs/DESIGN.md §3 "Timers"); actors/jobs/backstop_arming.py arms it.

The job, `run_backstop(prefix, host_id, second, dispatcher)`: reads the schedules of the
host's routes (its index set `keys.host_routes(host)` against the schedules zset) up to
`max(second, now)`, fires every one whose deadline has come and enqueues its dispatch
(`enqueue_dispatch`: the ledger and the job id make a repeat harmless). If some with a
deadline at or before `second` are not due yet (rq ran it early: clocks differ between
processes) or a fire failed, it arms the next second — always a later one, never a hot
loop. A late or duplicate run is a no-op: `fire_due` is fenced on (generation, ordinal) and
the deadline. Imports stay light (no Ray): the job runs in an rq worker.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar
from urllib.parse import quote, urlencode

import redis
from rq import get_current_job

from actors.clock import Clock, SystemClock
from actors.engine.circuit_effects import CircuitEffects, circuit_binding
from actors.engine.service import RouteService
from actors.errors import InvalidRouteIdError, RecoveryError
from actors.jobs.backstop_arming import BackstopArmer
from actors.jobs.queue import dispatch_queue, enqueue_dispatch
from actors.keys import KeySpace
from actors.routes.commands import RouteSettings
from actors.routes.models import RouteSnapshot, ScheduleEntry, attempt_retrying
from actors.store.circuit_store import CircuitStore
from actors.store.replies import reply_text, reply_texts
from actors.store.route_codec import decode_schedule
from actors.store.route_store import RouteStore

READ_BATCH: Final = 500
JOB_STORE_CONNECTIONS: Final = 4

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


def run_backstop(prefix: str, host_id: str, second: int, dispatcher: str) -> dict[str, Any]:
    """The rq job: fire host `host_id`'s due schedules and dispatch them."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("run_backstop runs as an rq job")
    report = fire_backstop(
        job.connection, job.origin, KeySpace(prefix), host_id, second, dispatcher=dispatcher,
        clock=SystemClock(),
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
    clock: Clock,
) -> BackstopReport:
    """What a backstop job does, on `connection`, at `clock`'s time."""
    now = clock.now()
    entries = host_schedules(connection, keys, host_id, max(float(second), now.timestamp()))
    due = [entry for entry in entries if entry.deadline <= now]
    early = sum(1 for e in entries if e.deadline > now and e.deadline.timestamp() <= second)
    url = connection_url(connection)
    fired, failed = asyncio.run(_fire_due(url, keys, host_id, due, clock))
    queue = dispatch_queue(connection, queue_name)
    dispatched = tuple(
        snapshot.route_id
        for snapshot in fired
        if enqueue_dispatch(
            queue, keys, snapshot.attempt, dispatcher=dispatcher, now=now, host_id=host_id
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


async def _fire_due(
    url: str, keys: KeySpace, host_id: str, due: Sequence[ScheduleEntry], clock: Clock
) -> tuple[list[RouteSnapshot], int]:
    """Fire each entry through the host's own path; (routes left retrying, failures)."""
    fired: list[RouteSnapshot] = []
    failed = 0
    if not due:
        return fired, failed
    store = RouteStore.connect(url, clock=clock, keys=keys, max_connections=JOB_STORE_CONNECTIONS)
    circuits = CircuitStore.connect(url, keys=keys, max_connections=JOB_STORE_CONNECTIONS)
    async with store, circuits:  # a due attempt meets its circuits here as on its host
        effects = CircuitEffects(circuits, store, circuit_binding())
        settings = RouteSettings(host_id=host_id)
        service = RouteService(store, clock, settings=settings, circuits=effects)
        for entry in due:
            try:
                snapshot = await service.fire_due(entry.fence)
            except RecoveryError as error:  # Redis trouble: the next second tries again
                log.warning("backstop could not fire route %s: %s", entry.route_id, error)
                failed += 1
                continue
            if attempt_retrying(snapshot, entry.fence):
                fired.append(snapshot)
    return fired, failed


def host_schedules(
    connection: redis.Redis, keys: KeySpace, host_id: str, until: float
) -> list[ScheduleEntry]:
    """The pending schedules of the routes in the host's index set with a deadline at or
    before `until` (epoch seconds), earliest first."""
    members = [reply_text(m) for m in connection.zrangebyscore(keys.schedules, "-inf", repr(until))]
    owned: list[str] = []
    for chunk in _chunks(members, READ_BATCH):
        flags = connection.smismember(keys.host_routes(host_id), list(chunk))
        owned += [member for member, flag in zip(chunk, flags, strict=True) if flag]
    entries: list[ScheduleEntry] = []
    for chunk in _chunks(owned, READ_BATCH):
        with connection.pipeline(transaction=False) as pipe:
            for route_id in chunk:
                try:
                    pipe.hgetall(keys.schedule(route_id))
                except InvalidRouteIdError:
                    continue  # never written by a store; never turned into a key
            hashes = pipe.execute()
        # A schedule cleared between the reads has no hash any more: it is not pending.
        entries += [decode_schedule(reply_texts(raw)) for raw in hashes if raw]
    return entries


def connection_url(connection: redis.Redis) -> str:
    """The URL of the Redis a redis-py client talks to (rq hands the job a client; the
    route store opens its own bounded pool from a URL)."""
    pool = connection.connection_pool
    settings = pool.connection_kwargs
    query: dict[str, Any] = {"db": settings.get("db", 0)}
    for name in ("username", "password"):
        if settings.get(name):
            query[name] = settings[name]
    if settings.get("path"):
        return f"unix://{quote(str(settings['path']))}?{urlencode(query)}"
    scheme = "rediss" if issubclass(pool.connection_class, redis.SSLConnection) else "redis"
    host, port = str(settings.get("host", "localhost")), settings.get("port", 6379)
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    return f"{scheme}://{host}:{port}?{urlencode(query)}"


def _chunks(items: Sequence[_Item], size: int) -> Iterable[Sequence[_Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
