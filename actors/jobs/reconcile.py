"""Reconciliation: re-enqueue the provably undispatched attempts of `retrying` routes and
move the ambiguous ones to `action_required`. rq's own registries are not consulted for
that rule (they mark a dead worker's job abandoned only after 60 s or more)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Protocol

from redis import Redis
from rq import Queue, Worker

from actors.engine.requests import Outcome
from actors.engine.settings import DEFAULT_DISPATCH_TIMEOUT_S
from actors.errors import CorruptRouteError
from actors.jobs.ledger import DispatchLedger, LedgerEntry
from actors.jobs.queue import enqueue_dispatch
from actors.jobs.worker_engine import worker_engine
from actors.keys import KeySpace
from actors.routes.commands import RouteCommand, SettleDispatch
from actors.routes.models import RouteSnapshot
from actors.routes.quarantine import quarantine_of
from actors.store.replies import reply_text
from actors.store.sync_reads import read_route

DEFAULT_STARTED_TIMEOUT_S: Final = 15 * 60  # above the longest dispatch timeout (600 s)
REASON_ABANDONED: Final = "dispatch started but never finished"


class Commands(Protocol):
    """Whatever runs route commands through the engine, blocking (a WorkerEngine, or a
    route host's service seen from a worker thread)."""

    def commands(
        self, host_id: str | None, items: Sequence[tuple[str, RouteCommand]]
    ) -> list[Outcome]: ...


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    """Route ids by what reconciliation did to their pending dispatch."""

    requeued: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)


def live_workers(connection: Redis) -> frozenset[str]:
    """Names of the rq workers registered on this Redis (a dead one expires)."""
    prefix = Worker.redis_worker_namespace_prefix
    return frozenset(key.removeprefix(prefix) for key in Worker.all_keys(connection=connection))


def retrying_routes(connection: Redis, keys: KeySpace) -> list[RouteSnapshot]:
    """Every route in `retrying` under the prefix (a SCAN: an administrative pass)."""
    return retrying_and_corrupt(connection, keys)[0]


def retrying_and_corrupt(
    connection: Redis, keys: KeySpace
) -> tuple[list[RouteSnapshot], list[CorruptRouteError]]:
    """`retrying_routes`, and the routes stored as `retrying` that cannot be decoded."""
    found: list[RouteSnapshot] = []
    corrupt: list[CorruptRouteError] = []
    route_prefix = keys.route("x")[:-1]
    for key in connection.scan_iter(match=f"{route_prefix}*", count=1000):
        route_id = reply_text(key).removeprefix(route_prefix)
        state = connection.hget(reply_text(key), "state")
        if state is not None and reply_text(state) == "retrying":
            try:
                found.append(read_route(connection, keys, route_id))
            except CorruptRouteError as error:
                corrupt.append(error)
    return found, corrupt


def reconcile(
    queue: Queue,
    keys: KeySpace,
    dispatcher: str,
    *,
    now: datetime,
    started_timeout_s: float = DEFAULT_STARTED_TIMEOUT_S,
    engine: Commands | None = None,
    dispatch_timeout_s: float = DEFAULT_DISPATCH_TIMEOUT_S,
) -> ReconcileReport:
    """One pass over the retrying routes: never started, or a NotDispatched redelivery
    never queued -> enqueue again (the job id and the ledger fence make a repeat
    harmless); started and not finished with its worker gone or its start older than
    `started_timeout_s` -> action_required; else leave. The
    route transitions go through `engine` (a host's service, or a worker engine built
    from the installation's settings; by default this process's worker engine); a
    dispatch enqueued again is bounded by `dispatch_timeout_s`, the installation's."""
    connection = queue.connection
    engine = engine or worker_engine(connection, keys)
    ledger = DispatchLedger(connection, keys)
    workers = live_workers(connection)
    report = ReconcileReport()
    routes, corrupt = retrying_and_corrupt(connection, keys)
    if corrupt:  # quarantined (never dispatched); the others are reconciled all the same
        engine.commands(None, [(error.route_id, quarantine_of(error)) for error in corrupt])
        report.quarantined.extend(error.route_id for error in corrupt)
    for route in routes:
        fence = route.attempt
        entry = ledger.read(fence)
        if entry.state in ("none", "queued") or entry.awaits_redelivery(route.redeliveries):
            job_id = enqueue_dispatch(
                queue, keys, fence, dispatcher=dispatcher, now=now, timeout_s=dispatch_timeout_s,
                redeliveries=route.redeliveries,
            )  # fmt: skip
            (report.requeued if job_id is not None else report.left).append(route.route_id)
        elif entry.state == "started" and _abandoned(entry, workers, now, started_timeout_s):
            # The probe, if it was one, may have happened: its lease runs to its TTL.
            command = SettleDispatch(
                fence.generation, fence.ordinal, REASON_ABANDONED, keep_probe_lease=True
            )
            engine.commands(None, [(route.route_id, command)])
            report.ambiguous.append(route.route_id)
        else:
            report.left.append(route.route_id)
    return report


def _abandoned(
    entry: LedgerEntry, workers: frozenset[str], now: datetime, timeout_s: float
) -> bool:
    if entry.worker not in workers:
        return True
    started = entry.started_at
    return started is None or (now - started).total_seconds() > timeout_s
