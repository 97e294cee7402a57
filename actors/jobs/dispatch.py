"""Dispatch of due retries through rq, with a ledger that makes each dispatch happen once.

A route that enters `retrying` gets one dispatch for its attempt (route, generation,
attempt ordinal) (docs/CONTRACTS.md, Routes). `enqueue_dispatch` writes the attempt's ledger
as `queued` and enqueues an rq job with a deterministic id. The job, `run_dispatch`,
runs in an rq worker (JSON serializer, its own process): it fences on the route (still
`retrying` at that generation and ordinal, else it does nothing), writes the ledger
`started` (refused if another run already started: a duplicated or re-enqueued job does
nothing), calls the orchestrator's dispatcher, and writes the ledger `finished` with
the outcome. `NotDispatched` means nothing was sent: the same attempt waits and is
delivered again after the dispatcher's hint or a doubling backoff, a bounded number of
times, without spending the provider's retry budget (actors/routes/dispatch_outcomes.py);
its redelivery queues the attempt's ledger again. Any
other exception is ambiguous: the route goes to `action_required` ("dispatch outcome
ambiguous") and the attempt is never dispatched again. So is a dispatcher still running
after the installation's `dispatch_timeout_s` ("dispatch timed out after N s"): the job
settles it and returns, and the worker goes on with the next dispatch (its job timeout
is longer, actors/jobs/queue.py, so rq never kills the job first). A dispatcher
that cannot be loaded is a configuration error, which a retry would only repeat: the
route goes to `action_required` ("dispatcher cannot be loaded").

Reconciliation lives in actors/jobs/reconcile.py, the ledger in actors/jobs/ledger.py,
enqueueing in actors/jobs/queue.py and the dispatcher contract in actors/jobs/dispatcher.py.

The ledger is synchronous redis-py, as rq is (the job uses its worker's connection); every
route transition the job causes goes through the worker's engine (actors/jobs/worker_engine.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

from redis import Redis
from redis.exceptions import RedisError
from rq import get_current_job

from actors.clock import SystemClock
from actors.engine.settings import EngineSettings
from actors.errors import error_text
from actors.jobs.backstop_arming import BackstopArmer
from actors.jobs.dispatcher import (
    AmbiguousDispatch,
    Dispatcher,
    NotDispatched,
    ReplayIdentity,
    call_dispatcher,
    facts_of,
    load_dispatcher,
)
from actors.jobs.ledger import DispatchLedger
from actors.jobs.queue import SETTLE_MARGIN_S
from actors.jobs.webhook import WEBHOOK, CandidateRef, WebhookDispatcher
from actors.jobs.worker_engine import WorkerEngine, worker_engine
from actors.keys import AttemptFence, KeySpace
from actors.routes.commands import ReturnUnsent, RouteCommand, SettleDispatch
from actors.routes.models import RouteSnapshot, attempt_retrying
from actors.store.wakes import Dispatched
from catalogue.sanitize import sanitize

REASON_UNLOADABLE: Final = "dispatcher cannot be loaded"
REASON_AMBIGUOUS: Final = "dispatch outcome ambiguous"

RunResult = Literal["delivered", "not_dispatched", "failed", "stale", "duplicate"]

log = logging.getLogger(__name__)


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
    timeout_s = worker_engine(job.connection, keys).settings.dispatch_timeout_s
    if job.timeout is not None and job.timeout > SETTLE_MARGIN_S:  # rq's limit: settle first
        timeout_s = min(timeout_s, job.timeout - SETTLE_MARGIN_S)
    return dispatch_once(
        job.connection, keys, AttemptFence(route_id, generation, ordinal),
        dispatcher=dispatcher, worker=worker, rearm=rearm, host_id=host_id,
        timeout_s=timeout_s,
    )  # fmt: skip


def _backstop_rearm(
    connection: Redis, queue_name: str, keys: KeySpace, host_id: str, dispatcher: str
) -> Callable[[RouteSnapshot], None]:
    """Arm the host's backstop for a schedule this job wrote: the host's in-process timer
    never saw that write, so the durable backstop is what fires it."""
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
    fence: AttemptFence,
    *,
    dispatcher: str,
    worker: str,
    rearm: Callable[[RouteSnapshot], None] | None = None,
    host_id: str | None = None,
    engine: WorkerEngine | None = None,
    timeout_s: float | None = None,
) -> RunResult:
    """What a dispatch job does, on `connection`, as `worker`: every route transition it
    causes goes through the worker's engine (`engine`, else this process's for the
    connection), for host `host_id`'s routes. `rearm` is given the route's snapshot when a
    NotDispatched left it waiting for its redelivery (the durable backstop of that wait).
    `timeout_s` bounds the dispatcher's call (None: the engine's `dispatch_timeout_s`).

    An attempt that held its circuit's probe lease (the probe): when nothing was sent
    (NotDispatched, a dispatcher that cannot be loaded) the lease is abandoned at once,
    so the next caller can probe now; when the outcome is ambiguous the lease is left to
    its TTL: the probe may have reached the provider and may still be running, so another
    probe now could be a second one at once, and its verdict will never be reported."""
    engine = engine or worker_engine(connection, keys)
    snapshot = engine.run(engine.store.snapshot(fence.route_id))
    if not attempt_retrying(snapshot, fence):
        return "stale"
    ledger = DispatchLedger(connection, keys)
    if ledger.start(fence, worker, _now()) != "applied":
        return "duplicate"
    identity = ReplayIdentity.of(
        fence, snapshot.candidate_id, provider_session_id=snapshot.provider_session_id,
        prompt_ref=snapshot.invocation_id,
    )  # fmt: skip
    settle = _Settle(engine, host_id, fence)
    try:
        call = _dispatcher(dispatcher, engine.settings, snapshot)
    except Exception as error:
        detail = sanitize(f"dispatcher {dispatcher!r} cannot be loaded: {error_text(error)}")
        ledger.finish(fence, "not_dispatched", _now(), detail=detail)
        settle(SettleDispatch(fence.generation, fence.ordinal, REASON_UNLOADABLE))
        return "not_dispatched"
    args = (
        fence.route_id, fence.generation, fence.ordinal, snapshot.candidate_id,
        snapshot.reason, identity,
    )  # fmt: skip
    timeout_s = timeout_s or engine.settings.dispatch_timeout_s
    try:
        returned = call_dispatcher(call, args, timeout_s=timeout_s)
    except NotDispatched as error:
        detail = error_text(error)
        ledger.finish(fence, "not_dispatched", _now(), detail=detail, facts=_facts(error))
        _announce(engine, host_id, fence, "not_dispatched", error)
        engine.abandon_unsent(snapshot)  # before re-planning: the next caller may probe
        again = settle(ReturnUnsent(fence.generation, fence.ordinal, detail, error.retry_after))
        if again is not None and again.deadline is not None and rearm is not None:
            try:
                rearm(again)
            except RedisError as error:  # durable anyway: the host's rehydration arms it
                log.warning("backstop of route %s not armed: %s", fence.route_id, error_text(error))
        return "not_dispatched"
    except Exception as error:
        explained = isinstance(error, AmbiguousDispatch)  # its message is safe to show
        detail = error_text(error) if explained else f"{type(error).__name__}: {error_text(error)}"
        ledger.finish(fence, "failed", _now(), detail=detail, facts=_facts(error))
        _announce(engine, host_id, fence, "failed", error)
        # a probe's lease is left to its TTL: the probe may have happened (docstring)
        reason = sanitize(str(error)) if explained else REASON_AMBIGUOUS
        settle(SettleDispatch(fence.generation, fence.ordinal, reason, keep_probe_lease=True))
        return "failed"
    ledger.finish(fence, "delivered", _now(), facts=_facts(returned))
    _announce(engine, host_id, fence, "delivered", returned)
    engine.announce_delivered(host_id, fence, snapshot.task_id)  # the session's accepted prompt
    return "delivered"


def _dispatcher(path: str, settings: EngineSettings, snapshot: RouteSnapshot) -> Dispatcher:
    """The dispatcher `path` names: the built-in webhook (for the route's candidate, with
    the installation's webhook settings), else the orchestrator's callable."""
    if path != WEBHOOK:
        return load_dispatcher(path)
    if settings.webhook_url is None or not settings.webhook_secret:
        raise ValueError("the webhook dispatcher needs webhook_url and webhook_secret")
    return WebhookDispatcher(
        settings.webhook_url, settings.webhook_secret, settings.webhook_timeout_s,
        CandidateRef.of(snapshot),
    )  # fmt: skip


def _facts(found: object) -> dict[str, str] | None:
    facts = facts_of(found)
    return None if facts is None else facts.ledger_fields()


def _announce(
    engine: WorkerEngine, host_id: str | None, fence: AttemptFence, outcome: str, found: object
) -> None:
    """What the dispatcher observed of its call (`found`: what it returned or raised),
    told to the owning host for its metrics; a dispatcher that observed nothing says
    nothing."""
    facts = facts_of(found)
    if facts is not None:
        engine.announce_dispatched(
            host_id, Dispatched(fence, outcome, facts.status, facts.latency_ms)
        )


@dataclass(frozen=True, slots=True)
class _Settle:
    """One command on the job's route through the engine: the route after it, or None
    when it failed (logged: the route is left as it is, and reconcile or an operator sees
    it `retrying` with a finished ledger)."""

    engine: WorkerEngine
    host_id: str | None
    fence: AttemptFence

    def __call__(self, command: RouteCommand) -> RouteSnapshot | None:
        [outcome] = self.engine.commands(self.host_id, [(self.fence.route_id, command)])
        if isinstance(outcome, Exception):
            route, why = self.fence.route_id, error_text(outcome)
            log.warning("route %s not settled after its dispatch: %s", route, why)
            return None
        return outcome


def _now() -> datetime:
    return datetime.now(UTC)
