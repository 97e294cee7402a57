"""`RouteHost`: an async Ray actor hosting the logical route actors hashed to it.

The host owns a RouteService over its own RouteStore (a bounded redis.asyncio pool) and
forwards the route API to it. Every written route joins the host's index set in Redis
(`RouteSettings.host_id`). After every call, the answer (the snapshot Redis returned)
arms, re-arms or cancels that route's in-process timer (actors/engine/timers.py), which
calls the fenced `fire_due` of its attempt (an AttemptFence).

Dispatch: a host built with a dispatcher import path enqueues the rq dispatch job
(actors/hosting/host_dispatch.py) whenever `fire_due`, `retry_now` or a circuit host's
probe wake leaves a route in `retrying`, only after that transition was written.
Enqueueing is idempotent (the attempt's ledger and the job id fence it); a route whose
enqueue met a Redis error is enqueued again by the host, backing off, until Redis takes
it (and by reconciliation at the next host start). Every timer armed is also covered by a durable
backstop (actors/jobs/backstop_arming.py): one coalesced rq delayed job per host and
second, which fires the due schedules through the same fenced `fire_due` if the host is
dead or wedged; a Redis error arming it is logged, and the call is unaffected.

Wakes (actors/hosting/host_wakes.py): a wait a job wrote for a route of the host arms its
timer; a dispatch a job delivered is its session's accepted prompt in the host's session
guards (`session_guard`, `notice_counts`; a ManualClock host: `advance_clock`).

On start (including every restart by Ray, `max_restarts=-1`) the host rehydrates: it
reads the pending schedules of the routes in its index set and arms them, so overdue ones
fire at once; with a dispatcher it then reconciles the pending dispatches
(`actors.jobs.dispatch.reconcile`) and settles the collector (actors/hosting/host_gc.py,
docs/DESIGN.md §5a). Calls wait for rehydration; the rules compile in a thread after it
(`warm_catalogue`), which `ready` waits for too.

Declared as a plain class; the runtime wraps it with `ray.remote(max_restarts=-1,
max_task_retries=-1)`. With task retries on, a call whose first attempt committed before
the host died is sent again to the restarted host and comes back rejected (a
TransitionRejectedError carrying the route's actual generation and state): see
`actors.hosting.runtime.committed_by_retry`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final, cast

import ray
from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.clock import Clock, ManualClock, SystemClock
from actors.engine.circuit_effects import CircuitEffects, Release
from actors.engine.notice_lifecycle import CancelOutcome
from actors.engine.notice_setup import route_notices
from actors.engine.schedulers import ManualScheduler
from actors.engine.service import RouteService
from actors.engine.session_guards import GuardView
from actors.engine.settings import EngineSettings
from actors.engine.timers import Due, RouteTimers
from actors.errors import RecoveryError, TransitionRejectedError, error_text
from actors.hosting import memory as host_memory
from actors.hosting.batcher import BatchItem, HostRequest, ReadHistory, ReadSnapshot
from actors.hosting.circuit_client import ActorCircuits
from actors.hosting.host_dispatch import HostDispatch
from actors.hosting.host_gc import settle_host_gc, warm_catalogue
from actors.hosting.host_wakes import WakeFollower
from actors.hosting.memory import HostMemory
from actors.hosting.metrics import circuit_metrics, notice_metrics, route_metrics
from actors.hosting.wire import WireBatch, pack
from actors.jobs.backstop_arming import BackstopArmer, HostBackstops
from actors.jobs.queue import DEFAULT_QUEUE
from actors.jobs.reconcile import ReconcileReport
from actors.keys import AttemptFence, valid_host_id
from actors.routes.commands import FireDue as FireDueCommand
from actors.routes.commands import ProbeParked, ReportFailure, RetryNow, RouteCommand
from actors.routes.models import RouteSnapshot, ScheduleEntry
from actors.store.circuit_store import CircuitStore
from actors.store.route_store import DEFAULT_MAX_CONNECTIONS, RouteStore
from actors.store.wakes import last_wake_id

REHYDRATE_RETRY_S: Final = 1.0
log = logging.getLogger(__name__)


def _is_read(request: HostRequest) -> bool:
    return isinstance(request, ReadSnapshot | ReadHistory)


class RouteHost:
    def __init__(
        self,
        host_id: str,
        redis_url: str,
        settings: EngineSettings | str,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        clock: Clock | None = None,
    ) -> None:
        """A host of `settings` (the installation's one settings value; a bare key prefix
        stands for the defaults under it)."""
        if isinstance(settings, str):
            settings = EngineSettings(key_prefix=settings)
        self.host_id = valid_host_id(host_id)
        self.settings = settings
        self._clock = clock or SystemClock()
        self._keys = settings.keys
        self._redis_url = redis_url
        self._store = RouteStore.connect(
            redis_url, clock=self._clock, keys=self._keys, max_connections=max_connections,
            events_maxlen=settings.events_maxlen,
        )  # fmt: skip
        route_settings = settings.route_settings(self.host_id)
        self._metrics = route_metrics()
        self._dispatch = HostDispatch(
            self.host_id, redis_url, settings, clock=self._clock, metrics=self._metrics
        )
        # Circuits: its own bounded pool; releases this host plans arm timers here too.
        binding = settings.circuit_binding()
        self._circuits = CircuitStore.connect(
            redis_url, keys=self._keys, max_connections=max_connections,
            settings=binding.settings, events_maxlen=settings.events_maxlen,
        )  # fmt: skip
        hosts = settings.circuit_hosts  # 0: no circuit hosts (and no ring of none to build)
        port = ActorCircuits(settings.key_prefix, hosts) if hosts else None
        effects = CircuitEffects(
            self._circuits, binding, observer=circuit_metrics(), port=port,
            on_released=self._released,
        )  # fmt: skip
        self._effects = effects
        # A test's ManualClock moves only through `advance_clock`, and the session guards'
        # late-event fences with it (a loop timer would wait out the real 5 minutes).
        manual = self._clock if isinstance(self._clock, ManualClock) else None
        self._guard_time = None if manual is None else ManualScheduler(manual)
        self._notices, self._transcript_client = route_notices(
            redis_url, settings, self._store, self._clock, scheduler=self._guard_time
        )
        self._service = RouteService(
            self._store, self._clock, settings=route_settings, on_applied=self._metrics.transition,
            circuits=effects, on_quarantined=self._metrics.quarantine, notices=self._notices,
        )  # fmt: skip
        self._timers = RouteTimers(
            self._timers_fired, self._clock, on_fired=self._metrics.timer_lateness.observe,
            batched=True,
        )  # fmt: skip
        self._backstops: HostBackstops | None = None
        if settings.dispatcher is not None:  # the workers that run dispatches run backstops too
            armer = BackstopArmer(
                self._dispatch.connection, settings.queue_name or DEFAULT_QUEUE, self._keys,
                self.host_id, settings.dispatcher, clock=self._clock,
            )  # fmt: skip
            self._backstops = HostBackstops(armer)
        self._rehydrated: list[ScheduleEntry] = []
        self._reconciled: ReconcileReport | None = None
        self._wakes = Redis.from_url(redis_url, decode_responses=True)
        self._follower = WakeFollower(
            self._wakes, self._keys, self.host_id, arm=self._timers.offer,
            delivered=lambda attempts: self._notices.delivered(attempts, self._service.snapshot),
            dispatched=self._metrics.dispatched,
        )  # fmt: skip
        # Ray runs an async actor's __init__ on its event loop: start rehydrating now,
        # without waiting for a first call (a restarted host has timers to fire).
        self._loop = asyncio.get_running_loop()
        self._ready = self._loop.create_task(self._rehydrate())
        self._warming = self._loop.create_task(warm_catalogue(after=self._ready))

    # Lifecycle and introspection

    async def ready(self) -> int:
        """Wait for rehydration and the catalogue (what a runtime's start waits for; a host
        Ray restarted serves calls before its catalogue); the number of schedules armed."""
        await self._ready
        await self._warming
        return len(self._rehydrated)

    async def process_id(self) -> int:
        return os.getpid()

    async def node_id(self) -> str:
        """The Ray node this host runs on (placement)."""
        return str(ray.get_runtime_context().get_node_id())

    async def settings_digest(self) -> tuple[dict[str, Any], str]:
        """The settings this host writes with, without the key, and the key's digest (an
        owner compares them before it keeps a host a previous owner left running)."""
        return self.settings.public(), self.settings.key_digest()

    async def start_tracing(self) -> HostMemory:
        """Start tracing allocations (bench/timers.py); the memory at the start."""
        host_memory.start_tracing()
        return host_memory.memory_now()

    async def memory_report(self, *, stop_tracing: bool = False) -> HostMemory:
        """This process's memory now (actors/hosting/memory.py); optionally stop tracing."""
        report = host_memory.memory_now()
        if stop_tracing:
            host_memory.stop_tracing()
        return report

    async def pending_timers(self) -> int:
        await self._ready
        return len(self._timers)

    async def reconciled(self) -> ReconcileReport | None:
        """What the reconciliation at this host's start did (None without a dispatcher)."""
        await self._ready
        return self._reconciled

    async def aclose(self) -> None:
        """Cancel the timers, send the circuit rounds still unsent, close the Redis pools."""
        await self._follower.aclose()
        await self._wakes.aclose()
        self._timers.cancel_all()
        if self._backstops is not None:
            await self._backstops.aclose()
        await self._effects.sends.drain()
        await self._effects.redelivery.aclose()
        await self._transcript_client.aclose()
        await self._store.aclose()
        await self._circuits.aclose()
        self._dispatch.close()

    async def _rehydrate(self) -> None:
        while True:
            try:
                # Waits announced from here on are followed (nothing lost meanwhile).
                seen = await last_wake_id(self._wakes, self._keys, self.host_id)
                entries = await self._own_schedules()
                break
            except (RedisError, RecoveryError) as error:  # Redis not reachable yet
                log.warning(
                    "route host %s cannot rehydrate yet: %s", self.host_id, error_text(error)
                )
                await asyncio.sleep(REHYDRATE_RETRY_S)
        for entry in entries:
            self._timers.arm_schedule(entry)
            if self._backstops is not None:
                self._backstops.cover(entry.deadline)
        self._rehydrated = entries
        self._follower.start(seen)
        if self._dispatch.dispatcher is not None:
            try:
                self._reconciled = await asyncio.to_thread(
                    self._dispatch.reconcile, self._service, self._loop
                )
            except (RedisError, RecoveryError) as error:
                log.warning(
                    "route host %s could not reconcile dispatches: %s",
                    self.host_id,
                    error_text(error),
                )
        settle_host_gc()
        log.info("route host %s rehydrated %d schedules", self.host_id, len(entries))

    async def _own_schedules(self) -> list[ScheduleEntry]:
        index = Redis.from_url(self._redis_url, decode_responses=True)
        try:
            members = await index.smembers(self._keys.host_routes(self.host_id))
        finally:
            await index.aclose()
        if not members:
            return []
        owned = {str(member) for member in members}
        entries, corrupt = await self._store.schedules_and_corrupt()
        # A schedule that cannot be read is its route's quarantine, never a host not ready.
        for outcome in await self._service.quarantine([c for c in corrupt if c.route_id in owned]):
            if isinstance(outcome, Exception):
                log.warning("route host %s: a quarantine failed: %s", self.host_id, outcome)
        return [entry for entry in entries if entry.route_id in owned]

    async def run_batch(self, items: list[BatchItem]) -> list[Any]:
        """A batch of route requests from one HostBatcher (actors/hosting/batcher.py): the
        commands as one pipelined round (RouteService.run_many), the reads beside them.
        Per item, its answer or its exception as a value; every answer sets its route's
        timer, and routes a timer or a retry-now left `retrying` are dispatched."""
        await self._ready
        self._metrics.batch_size.observe(len(items))
        answers: list[Any] = [None] * len(items)
        commands = [i for i, (_, request) in enumerate(items) if not _is_read(request)]
        outcomes = await self._service.run_many(
            [(items[i][0], cast(RouteCommand, items[i][1])) for i in commands]
        )
        due: list[RouteSnapshot] = []
        for index, outcome in zip(commands, outcomes, strict=True):
            answers[index] = outcome
            request = items[index][1]
            if isinstance(outcome, TransitionRejectedError):
                self._metrics.rejection(outcome)
            if not isinstance(outcome, RouteSnapshot):
                continue
            self._tracked(outcome)
            if isinstance(request, ReportFailure):
                self._metrics.decision(outcome)
            if isinstance(request, RetryNow | FireDueCommand):
                due.append(outcome)
        self._metrics.pending_timers.set(len(self._timers), tags={"host": self.host_id})
        self._notices_exported()
        await self._dispatch.enqueue(due)
        reads = [i for i, (_, request) in enumerate(items) if _is_read(request)]
        results = await asyncio.gather(
            *(self._read(*items[i]) for i in reads), return_exceptions=True
        )
        for index, result in zip(reads, results, strict=True):
            answers[index] = result
        return answers

    async def run_compact(self, items: list[BatchItem]) -> WireBatch:
        """`run_batch` packed for Ray (actors/hosting/wire.py): what a HostBatcher calls."""
        return pack(await self.run_batch(items))

    async def _read(self, route_id: str, request: HostRequest) -> Any:
        if isinstance(request, ReadHistory):
            return await self._service.history(route_id)
        return await self._service.snapshot(route_id)

    async def arm_release(self, release: Release) -> list[AttemptFence]:
        """A circuit host's release of this host's parked routes (actors/hosting/
        circuit_host.py): each gets its wave slot, and its timer is armed here; the
        attempts of the routes moved (the circuit host waits on their dispatch ledgers).
        Raises when the routes cannot be read (the circuit host sends it again)."""
        await self._ready
        return [snapshot.attempt for snapshot in await self._service.release(release)]

    async def cancel_transient_retry(
        self, task_id: str, session_id: str, principal: str | None = None
    ) -> CancelOutcome | RecoveryError:
        """The authorised cancel of a session's transient retry (RouteService's): its timer
        is disarmed here when it stopped a loop. A refusal is the answer, as a value (the
        handle raises it), like a batch item's."""
        await self._ready
        try:
            outcome = await self._service.cancel_transient_retry(task_id, session_id, principal)
        except RecoveryError as error:
            return error
        self._tracked(outcome.snapshot)
        self._notices_exported()
        return outcome

    async def notice_counts(self) -> dict[str, int]:
        """What this host's notices did since it started, and its session guard table:
        live entries, those owned, and those past their fence (0 unless reclaiming broke)."""
        notices = self._notices.notices
        return {**dataclasses.asdict(notices.tally), **notices.guards.counts()}

    async def session_guard(self, session_id: str) -> GuardView | None:
        """The session's entry in this host's guard table (None: it has none)."""
        return self._notices.notices.guards.view(session_id)

    async def wakes_followed(self, entry_id: str) -> None:
        """Wait until this host has taken every entry of its wake stream up to `entry_id`."""
        await self._ready
        await self._follower.followed(entry_id)

    async def advance_clock(self, seconds: float) -> int:
        """Tests: move this host's ManualClock on by `seconds` and run the session guards'
        fences that came due; how many ran. TypeError for a host on another clock."""
        if self._guard_time is None:
            raise TypeError(f"host {self.host_id} has no ManualClock to advance")
        self._guard_time.clock.advance(timedelta(seconds=seconds))
        return self._guard_time.run_due()

    def _notices_exported(self) -> None:
        notices = self._notices.notices
        tally = dataclasses.asdict(notices.tally)
        notice_metrics().observe(tally, notices.guards.live_entries, self.host_id)

    async def wake_probe(self, circuit: str, route_id: str) -> bool:
        """A circuit host's wake of `route_id`, parked on `circuit` whose probe is due: its
        attempt asks for the lease and dispatches as the probe if granted (else it parks
        again). True when it took the lease."""
        await self._ready
        (outcome,) = await self._service.run_many([(route_id, ProbeParked(circuit))])
        if not isinstance(outcome, RouteSnapshot):
            raise outcome
        await self._dispatch.enqueue([self._tracked(outcome)])
        return outcome.state == "retrying" and outcome.probe_token is not None

    def _released(self, snapshots: Sequence[RouteSnapshot]) -> None:
        """Parked routes this host gave a wave slot after a circuit closed: armed here, so
        they fire at their slot (with no circuit hosts, another host's routes too: their
        owner's timer is later; fenced)."""
        for snapshot in snapshots:
            self._tracked(snapshot)

    def _tracked(self, snapshot: RouteSnapshot) -> RouteSnapshot:
        self._timers.track(snapshot)
        if self._backstops is not None:
            self._backstops.cover_snapshot(snapshot)
        return snapshot

    # Dispatch

    async def _timers_fired(self, due: Sequence[Due]) -> list[RouteSnapshot | Exception]:
        """What timers due together perform, as one batch (RouteTimers tracks the answers
        itself): the fenced fires, then the dispatch of the routes they left retrying."""
        outcomes = await self._service.run_many(
            [(fence.route_id, FireDueCommand(fence.generation, fence.ordinal)) for fence in due]
        )
        await self._dispatch.enqueue([o for o in outcomes if isinstance(o, RouteSnapshot)])
        self._notices_exported()
        return outcomes
