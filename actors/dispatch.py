"""Dispatch of due retries through rq, with a ledger that makes each dispatch happen once.

A route that enters `retrying` gets one dispatch for its attempt (route, generation,
attempt ordinal) (CONTRACTS.md, Routes). `enqueue_dispatch` writes the attempt's ledger
as `queued` and enqueues an rq job with a deterministic id. The job, `run_dispatch`,
runs in an rq worker (JSON serializer, its own process): it fences on the route (still
`retrying` at that generation and ordinal, else it does nothing), writes the ledger
`started` (refused if another run already started: a duplicated or re-enqueued job does
nothing), calls the orchestrator's dispatcher, and writes the ledger `finished` with
the outcome. `NotDispatched` means nothing was sent: the attempt goes back to the policy
as a failure reported before any partial result, which retries (the next ordinal, a
new schedule in Redis), waits, skips or stops (actors/dispatch_routes.py). Any other
exception, a timeout included, is ambiguous: the route goes to `action_required`
("dispatch outcome ambiguous") and the attempt is never dispatched again. A dispatcher
that cannot be loaded is a configuration error, which a retry would only repeat: the
route goes to `action_required` ("dispatcher cannot be loaded").

`reconcile` re-enqueues only provably undispatched attempts (ledger missing or still
queued) and moves ambiguous ones (started, never finished, its worker gone or the start
too old) to `action_required`. rq's own registries are not consulted for that rule.

Everything here is synchronous redis-py, as rq is: the job uses its worker's connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Worker, get_current_job
from rq.exceptions import DuplicateJobError, NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from actors.clock import SystemClock
from actors.dispatch_routes import (
    abandon_unsent_probe,
    pending,
    read_route,
    reevaluate_not_dispatched,
    require_action,
)
from actors.errors import RecoveryError
from actors.keys import KeySpace, valid_route_id
from actors.route_circuit_effects import circuit_binding
from actors.route_circuits import CircuitBinding
from actors.route_models import RouteSnapshot
from actors.route_steps import clip
from actors.scripts import script

JOB_FUNCTION: Final = "actors.dispatch.run_dispatch"
DEFAULT_QUEUE: Final = "recovery-dispatch"
LEDGER_TTL_S: Final = 7 * 24 * 3600
DEFAULT_STARTED_TIMEOUT_S: Final = 15 * 60
JOB_TIMEOUT_S: Final = 10 * 60
# Jobs rq holds that will still run (or are running): enqueuing again would only repeat them.
PENDING_JOB_STATUSES: Final = frozenset(
    {JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.STARTED, JobStatus.DEFERRED}
)

REASON_UNLOADABLE: Final = "dispatcher cannot be loaded"
REASON_AMBIGUOUS: Final = "dispatch outcome ambiguous"
REASON_ABANDONED: Final = "dispatch started but never finished"

LedgerState = Literal["none", "queued", "started", "finished"]
Outcome = Literal["delivered", "not_dispatched", "failed"]
RunResult = Literal["delivered", "not_dispatched", "failed", "stale", "duplicate"]

log = logging.getLogger(__name__)


class NotDispatched(RecoveryError):  # noqa: N818 - the name CONTRACTS.md gives dispatchers
    """Raised by a dispatcher when it sent nothing: the attempt can be re-evaluated."""


@dataclass(frozen=True, slots=True)
class ReplayIdentity:
    """What identifies the turn to replay (CONTRACTS.md, Routes). `prompt_ref` is the
    route's invocation id; `provider_session_id` the agent's own session id the route
    recorded for its current candidate (None: no provider-native resume)."""

    route_id: str
    generation: int
    ordinal: int
    candidate_id: str | None
    provider_session_id: str | None = None
    prompt_ref: str | None = None


Dispatcher = Callable[[str, int, int, str | None, str | None, ReplayIdentity], Any]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    state: LedgerState
    fields: Mapping[str, str] = field(default_factory=dict)

    @property
    def worker(self) -> str | None:
        return self.fields.get("worker") or None

    @property
    def started_at(self) -> datetime | None:
        text = self.fields.get("started_at")
        return datetime.fromisoformat(text) if text else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _texts(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(name): _text(value) for name, value in raw.items()}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def dispatch_job_id(keys: KeySpace, route_id: str, generation: int, ordinal: int) -> str:
    """rq admits only `[A-Za-z0-9_-]` in job ids: a hash of the attempt's ledger key."""
    ledger_key = keys.dispatch(route_id, generation, ordinal)
    return "dispatch-" + hashlib.sha256(ledger_key.encode()).hexdigest()[:40]


class DispatchLedger:
    """The ledger hashes under one key prefix, each step one run of dispatch_ledger.lua."""

    def __init__(self, connection: Redis, keys: KeySpace, *, ttl_s: int = LEDGER_TTL_S) -> None:
        if ttl_s < 1:
            raise ValueError(f"ttl_s must be >= 1, got {ttl_s}")
        self.keys = keys
        self.ttl_s = ttl_s
        self._connection = connection
        self._script = connection.register_script(script("dispatch_ledger").source)

    def read(self, route_id: str, generation: int, ordinal: int) -> LedgerEntry:
        raw = _texts(self._connection.hgetall(self.keys.dispatch(route_id, generation, ordinal)))
        state = raw.get("state", "none")
        if state not in ("queued", "started", "finished"):
            return LedgerEntry("none", raw)
        return LedgerEntry(state, raw)  # type: ignore[arg-type]  # checked just above

    def queue(self, route_id: str, generation: int, ordinal: int, job_id: str, at: datetime) -> str:
        return self._step(route_id, generation, ordinal, ["queue", _iso(at), job_id, ""])

    def start(self, route_id: str, generation: int, ordinal: int, worker: str, at: datetime) -> str:
        return self._step(route_id, generation, ordinal, ["start", _iso(at), worker, ""])

    def finish(
        self, route_id: str, generation: int, ordinal: int, outcome: Outcome, at: datetime, *,
        detail: str = "",
    ) -> str:  # fmt: skip
        return self._step(route_id, generation, ordinal, ["finish", _iso(at), outcome, detail])

    def _step(self, route_id: str, generation: int, ordinal: int, argv: list[str]) -> str:
        """ "applied" when the step was written, else the ledger's state that refused it."""
        key = self.keys.dispatch(route_id, generation, ordinal)
        applied, state = self._script(keys=[key], args=[*argv, str(self.ttl_s)])
        return "applied" if int(applied) == 1 else _text(state)


# Enqueueing


def default_queue_name(prefix: str) -> str:
    """The dispatch queue of a key prefix, as the runtime and `recovery reconcile` name it."""
    return f"{prefix}-dispatch"


def dispatch_queue(connection: Redis, name: str = DEFAULT_QUEUE) -> Queue:
    """The rq queue dispatch jobs go to, with the JSON serializer."""
    return Queue(name, connection=connection, serializer=JSONSerializer)


def enqueue_dispatch(
    queue: Queue,
    keys: KeySpace,
    route_id: str,
    generation: int,
    ordinal: int,
    *,
    dispatcher: str,
    now: datetime,
    host_id: str | None = None,
) -> str | None:
    """Write the attempt's ledger `queued` (if it has none) and enqueue its job. The job
    id, or None when the ledger shows the attempt already started or finished (nothing is
    enqueued then: it was dispatched, or its outcome is someone else's to settle).
    `host_id`: the route host owning the route, so that a schedule the job writes (a
    NotDispatched re-evaluated into a new wait) gets that host's durable backstop."""
    valid_route_id(route_id)
    job_id = dispatch_job_id(keys, route_id, generation, ordinal)
    ledger = DispatchLedger(queue.connection, keys)
    refused = ledger.queue(route_id, generation, ordinal, job_id, now)
    if refused not in ("applied", "queued"):
        return None
    args = (keys.prefix, route_id, generation, ordinal, dispatcher, host_id)
    _enqueue_once(queue, job_id, args)
    return job_id


def _enqueue_once(queue: Queue, job_id: str, args: tuple[Any, ...]) -> None:
    """Enqueue unless rq still holds a pending job with this id (the id dedups); a job rq
    has done with is replaced. A duplicate that slips through is a no-op run."""
    options: dict[str, Any] = {
        "job_id": job_id, "job_timeout": JOB_TIMEOUT_S, "result_ttl": 3600,
        "failure_ttl": LEDGER_TTL_S, "unique": True,
    }  # fmt: skip
    try:
        queue.enqueue(JOB_FUNCTION, *args, **options)
    except DuplicateJobError:
        try:
            existing = Job.fetch(job_id, connection=queue.connection, serializer=JSONSerializer)
        except NoSuchJobError:  # gone meanwhile
            queue.enqueue(JOB_FUNCTION, *args, **options)
            return
        if existing.get_status() in PENDING_JOB_STATUSES:
            return
        existing.delete()
        queue.enqueue(JOB_FUNCTION, *args, **options)


# The job


def load_dispatcher(path: str) -> Dispatcher:
    """The callable at `module:attribute`."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a dispatcher path is 'module:callable', got {path!r}")
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"dispatcher {path!r} is not callable")
    dispatcher: Dispatcher = found
    return dispatcher


def run_dispatch(  # noqa: PLR0917 - the job's arguments, as enqueued
    prefix: str,
    route_id: str,
    generation: int,
    ordinal: int,
    dispatcher: str,
    host_id: str | None = None,
) -> str:
    """The rq job: dispatch attempt (route, generation, ordinal) at most once."""
    job = get_current_job()
    if job is None:
        raise RuntimeError("run_dispatch runs as an rq job")
    worker = job.worker_name or f"job-{job.id}"
    keys = KeySpace(prefix)
    rearm = None
    if host_id is not None:
        rearm = _backstop_rearm(job.connection, job.origin, keys, host_id, dispatcher)
    return dispatch_once(
        job.connection, keys, route_id, generation, ordinal, dispatcher=dispatcher,
        worker=worker, rearm=rearm, circuits=circuit_binding(),
    )  # fmt: skip


def _backstop_rearm(
    connection: Redis, queue_name: str, keys: KeySpace, host_id: str, dispatcher: str
) -> Callable[[RouteSnapshot], None]:
    """Arm the host's backstop for a schedule this job wrote: the host's in-process timer
    never saw that write, so the durable backstop is what fires it."""
    from actors.backstop import BackstopArmer  # noqa: PLC0415 - backstop imports this module

    armer = BackstopArmer(
        lambda: connection, queue_name, keys, host_id, dispatcher, clock=SystemClock()
    )

    def rearm(snapshot: RouteSnapshot) -> None:
        if snapshot.deadline is not None:
            armer.arm([snapshot.deadline])

    return rearm


def dispatch_once(
    connection: Redis,
    keys: KeySpace,
    route_id: str,
    generation: int,
    ordinal: int,
    *,
    dispatcher: str,
    worker: str,
    rearm: Callable[[RouteSnapshot], None] | None = None,
    circuits: CircuitBinding | None = None,
) -> RunResult:
    """What a dispatch job does, on `connection`, as `worker`. `rearm` is given the
    route's snapshot when a NotDispatched re-evaluation left it waiting again; with
    `circuits`, that re-evaluation plans with the circuits (actors/dispatch_routes.py).

    An attempt that held its circuit's probe lease (the probe): when nothing was sent
    (NotDispatched, a dispatcher that cannot be loaded) the lease is abandoned at once,
    so the next caller can probe now; when the outcome is ambiguous the lease is left to
    its TTL: the probe may have reached the provider and may still be running, so another
    probe now could be a second one at once, and its verdict will never be reported."""
    snapshot = read_route(connection, keys, route_id)
    if not pending(snapshot, generation, ordinal):
        return "stale"
    ledger = DispatchLedger(connection, keys)
    if ledger.start(route_id, generation, ordinal, worker, _now()) != "applied":
        return "duplicate"
    identity = ReplayIdentity(
        route_id, generation, ordinal, snapshot.candidate_id,
        provider_session_id=snapshot.provider_session_id, prompt_ref=snapshot.invocation_id,
    )  # fmt: skip
    try:
        call = load_dispatcher(dispatcher)
    except Exception as error:
        detail = clip(f"dispatcher {dispatcher!r} cannot be loaded: {type(error).__name__}")
        ledger.finish(route_id, generation, ordinal, "not_dispatched", _now(), detail=detail)
        abandon_unsent_probe(connection, keys, snapshot, _now())
        require_action(connection, keys, route_id, generation, ordinal, reason=REASON_UNLOADABLE)
        return "not_dispatched"
    try:
        result = call(
            route_id, generation, ordinal, snapshot.candidate_id, snapshot.reason, identity
        )
        if inspect.isawaitable(result):
            asyncio.run(_awaited(result))
    except NotDispatched as error:
        detail = clip(str(error))
        ledger.finish(route_id, generation, ordinal, "not_dispatched", _now(), detail=detail)
        abandon_unsent_probe(connection, keys, snapshot, _now())
        again = reevaluate_not_dispatched(
            connection, keys, route_id, generation, ordinal, detail=detail, binding=circuits
        )
        if again is not None and again.deadline is not None and rearm is not None:
            try:
                rearm(again)
            except RedisError as error:  # durable anyway: the host's rehydration arms it
                log.warning("backstop of route %s not armed: %s", route_id, error)
        return "not_dispatched"
    except Exception as error:
        detail = type(error).__name__
        ledger.finish(route_id, generation, ordinal, "failed", _now(), detail=detail)
        # a probe's lease is left to its TTL: the probe may have happened (docstring)
        require_action(connection, keys, route_id, generation, ordinal, reason=REASON_AMBIGUOUS)
        return "failed"
    ledger.finish(route_id, generation, ordinal, "delivered", _now())
    return "delivered"


async def _awaited(result: Any) -> None:
    await result


def _now() -> datetime:
    return datetime.now(UTC)


# Reconciliation


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    """Route ids by what reconciliation did to their pending dispatch."""

    requeued: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)


def live_workers(connection: Redis) -> frozenset[str]:
    """Names of the rq workers registered on this Redis (a dead one expires)."""
    prefix = Worker.redis_worker_namespace_prefix
    return frozenset(key.removeprefix(prefix) for key in Worker.all_keys(connection=connection))


def retrying_routes(connection: Redis, keys: KeySpace) -> list[RouteSnapshot]:
    """Every route in `retrying` under the prefix (a SCAN: an administrative pass)."""
    found: list[RouteSnapshot] = []
    route_prefix = keys.route("x")[:-1]
    for key in connection.scan_iter(match=f"{route_prefix}*", count=1000):
        route_id = _text(key).removeprefix(route_prefix)
        state = connection.hget(_text(key), "state")
        if state is not None and _text(state) == "retrying":
            found.append(read_route(connection, keys, route_id))
    return found


def reconcile(
    queue: Queue,
    keys: KeySpace,
    dispatcher: str,
    *,
    now: datetime,
    started_timeout_s: float = DEFAULT_STARTED_TIMEOUT_S,
) -> ReconcileReport:
    """One pass over the retrying routes: never started -> enqueue again (the job id and
    the ledger fence make a repeat harmless); started and not finished with its worker
    gone or its start older than `started_timeout_s` -> action_required; else leave."""
    connection = queue.connection
    ledger = DispatchLedger(connection, keys)
    workers = live_workers(connection)
    report = ReconcileReport()
    for route in retrying_routes(connection, keys):
        generation, ordinal = route.generation, route.attempt_ordinal
        entry = ledger.read(route.route_id, generation, ordinal)
        if entry.state in ("none", "queued"):
            job_id = enqueue_dispatch(
                queue, keys, route.route_id, generation, ordinal, dispatcher=dispatcher, now=now
            )
            (report.requeued if job_id is not None else report.left).append(route.route_id)
        elif entry.state == "started" and _abandoned(entry, workers, now, started_timeout_s):
            require_action(
                connection,
                keys,
                route.route_id,
                generation,
                ordinal,
                reason=REASON_ABANDONED,
                now=now,
            )
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
