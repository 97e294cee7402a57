"""The route service: the route logic (actors/routes/plan.py) over a RouteStore.

Each call reads the route's snapshot, plans one transition from it with the clock's time,
and applies that transition to Redis in one script before anything else happens; the
applied snapshot is the answer. Calls on one route run strictly one after another
(a lock per route, held only while calls are in flight); calls on different routes run
concurrently. Across processes the store's fence decides: every transition is fenced on
the generation, state and attempt ordinal it was planned from.

Errors: a stale expected generation raises StaleGenerationError, a command the route's
state does not allow raises InvalidStateError (or StaleOrdinalError when another writer
overtook the read), all with no effect; a Redis failure raises StoreUnavailableError and
nothing else happens; a stored profile that is not a valid profile raises
CorruptProfileError (a failure report on such a route stops it instead). A route whose
stored data does not decode at all is quarantined by whatever command meets it
(actors/routes/quarantine.py): the answer is the route stopped, `corrupt: ...`.
`fire_due` never raises a rejection: a late, duplicate or early timer returns the route
as it is.

Circuits: with `circuits` (actors/engine/circuit_effects.py) every call plans against the
circuits of its route's candidate: a wait on an open circuit is parked, a due attempt
into one is parked again unless it takes the probe lease, and a probe's report closes or
reopens the circuit (a close releases the parked routes in waves). Without it, circuits
are not consulted (as if all were closed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from actors.clock import Clock
from actors.engine.batch import BatchRunner
from actors.engine.circuit_effects import CircuitEffects, Release
from actors.engine.notice_lifecycle import CancelOutcome, RouteNotices
from actors.engine.requests import Outcome
from actors.engine.route_locks import RouteLocks
from actors.errors import CorruptRouteError, InvalidCommandError, TransitionRejectedError
from actors.keys import AttemptFence
from actors.routes.commands import (
    CancelWait,
    Close,
    FireDue,
    ReportFailure,
    ReportSuccess,
    Resume,
    RetryNow,
    RouteCommand,
    RouteContext,
    RouteSettings,
    SkipNow,
    Start,
    StartFresh,
    StopRoute,
    UpdateProfile,
)
from actors.routes.models import AttemptRecord, RouteSnapshot, ScheduleEntry
from actors.routes.profiles import RouteProfile
from actors.routes.quarantine import quarantine_of
from actors.routes.steps import LIVE
from actors.store.profile_store import ProfileStore
from actors.store.route_store import RouteStore
from catalogue import Classification, Evidence
from policy import TurnEvidence

PROFILE_UPDATE_ATTEMPTS: Final = 3


log = logging.getLogger(__name__)


class RouteService:
    """The orchestrator-facing route operations. Every call returns the authoritative
    snapshot of the route once the call has taken effect."""

    def __init__(
        self,
        store: RouteStore,
        clock: Clock,
        *,
        settings: RouteSettings | None = None,
        on_applied: Callable[[RouteSnapshot], None] | None = None,
        circuits: CircuitEffects | None = None,
        locks: RouteLocks | None = None,
        on_quarantined: Callable[[RouteSnapshot, str], None] | None = None,
        notices: RouteNotices | None = None,
        profiles: ProfileStore | None = None,
    ) -> None:
        """`locks`: shared with other services writing the same routes in this process
        (a worker's services per host), so each route's transitions stay serial.
        `on_quarantined(snapshot, field)` sees every route quarantined (metrics).
        `notices`: the transcript notices of routes started with a task id. `profiles`:
        the stored profiles routes started by profile id follow (None: the profile store
        on the route store's own client and prefix)."""
        self.store = store
        self.profiles = profiles or ProfileStore(store.client, clock=clock, keys=store.keys)
        self.settings = settings or RouteSettings()
        self._clock = clock
        self.locks = locks or RouteLocks()
        self.circuits = circuits
        self.notices = notices
        self._runner = BatchRunner(
            store, self.locks, self._context, on_applied, circuits,
            on_quarantined=on_quarantined,
            on_committed=None if notices is None else notices.committed, profiles=self.profiles,
        )  # fmt: skip

    # Starting and reporting

    async def start(
        self,
        route_id: str,
        profile: RouteProfile | None = None,
        *,
        caller: str,
        invocation_id: str,
        provider_session_id: str | None = None,
        request_id: str | None = None,
        task_id: str | None = None,
        utility: bool = False,
        recovery_deadline: datetime | None = None,
        profile_id: str | None = None,
    ) -> RouteSnapshot:
        """A new route on the profile's first enabled candidate, generation 1. Every
        command takes an optional `request_id`: a request applied before is not applied
        again, and answers its first outcome's snapshot. `task_id`: the orchestrator's
        task of the session (its transcript notices are written for it). `profile_id`
        instead of `profile`: the route follows that stored profile."""
        command = Start(
            profile, caller, invocation_id, provider_session_id, request_id, task_id, utility,
            recovery_deadline, profile_id,
        )  # fmt: skip
        return await self._run(route_id, command)

    async def report_failure(
        self,
        route_id: str,
        expected_generation: int,
        evidence: Evidence | Classification,
        turn: TurnEvidence | None,
        *,
        caller: str,
        invocation_id: str,
        provider_session_id: str | None = None,
        attempt: int | None = None,
        request_id: str | None = None,
        utility: bool = False,
    ) -> RouteSnapshot:
        command = ReportFailure(
            expected_generation, evidence, turn, caller, invocation_id, provider_session_id,
            attempt, request_id, utility,
        )  # fmt: skip
        return await self._run(route_id, command)

    async def report_success(
        self, route_id: str, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        return await self._run(route_id, ReportSuccess(expected_generation, request_id))

    # Manual actions

    async def retry_now(
        self, route_id: str, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        return await self._run(route_id, RetryNow(expected_generation, request_id))

    async def skip_now(
        self, route_id: str, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        return await self._run(route_id, SkipNow(expected_generation, request_id))

    async def cancel_wait(
        self, route_id: str, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        return await self._run(route_id, CancelWait(expected_generation, request_id))

    async def stop(
        self, route_id: str, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        return await self._run(route_id, StopRoute(expected_generation, request_id))

    async def resume(
        self, route_id: str, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        return await self._run(route_id, Resume(expected_generation, request_id))

    async def start_fresh(
        self,
        route_id: str,
        expected_generation: int,
        profile: RouteProfile | None = None,
        *,
        request_id: str | None = None,
        recovery_deadline: datetime | None = None,
        profile_id: str | None = None,
    ) -> RouteSnapshot:
        command = StartFresh(
            expected_generation, profile, request_id, recovery_deadline, profile_id
        )
        return await self._run(route_id, command)

    async def close(
        self, route_id: str, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        return await self._run(route_id, Close(expected_generation, request_id))

    async def update_profile(self, route_id: str, profile: RouteProfile) -> RouteSnapshot:
        """Store an edited profile for the route's next decision. Needs no generation:
        it is re-planned if another writer moved the route meanwhile."""
        command = UpdateProfile(profile)
        for _ in range(PROFILE_UPDATE_ATTEMPTS - 1):
            try:
                return await self._run(route_id, command)
            except TransitionRejectedError as error:
                if error.actual_state not in LIVE:
                    raise  # not started, or closed: no profile to edit
                # another writer moved the route between the read and the write: re-plan
        return await self._run(route_id, command)

    # Timers

    async def fire_due(self, fence: AttemptFence) -> RouteSnapshot:
        """The fenced `retry_wait | waiting_for_reset -> retrying` a timer performs. A
        no-op returning the route as it is unless attempt `fence` is still the pending one
        and its deadline has come."""
        return await self._run(fence.route_id, FireDue(fence.generation, fence.ordinal))

    async def fire_due_schedules(self, limit: int = 100) -> list[RouteSnapshot]:
        """Fire every schedule whose deadline has come (earliest first, at most `limit`):
        what a coalesced backstop job does. The snapshots after each attempt to fire."""
        due, corrupt = await self.store.due_and_corrupt(self._clock.now(), limit)
        await self.quarantine(corrupt)
        return [await self.fire_due(entry.fence) for entry in due]

    async def quarantine(self, corrupt: Sequence[CorruptRouteError]) -> list[Outcome]:
        """Quarantine the routes whose stored data a reader found corrupt (their schedule
        hash, say): each goes to `action_required` naming the key and field."""
        return await self.run_many([(error.route_id, quarantine_of(error)) for error in corrupt])

    # Reads

    async def snapshot(self, route_id: str) -> RouteSnapshot:
        return await self.store.snapshot(route_id)

    async def history(self, route_id: str) -> list[AttemptRecord]:
        return await self.store.history(route_id)

    async def schedules(self, limit: int | None = None) -> list[ScheduleEntry]:
        return await self.store.schedules(limit)

    async def cancel_transient_retry(
        self, task_id: str, session_id: str, principal: str | None = None
    ) -> CancelOutcome:
        """Cancel the session's transient retry, authorised first: NotAuthorisedError (the
        same for a denied pair and one that does not exist) before anything is read; then
        its notices are retired, and an active retry loop is stopped (action_required)
        with a manual-recovery message (Resume, Start fresh). Idempotent: with no loop
        running it only cleans up, and `active` is False."""
        if self.notices is None:
            raise InvalidCommandError("transcript", None, "a service that keeps notices")
        return await self.notices.cancel_transient_retry(
            task_id, session_id, principal, read=self.snapshot, run=self._run
        )

    # The one write path (actors/engine/batch.py)

    async def release(self, release: Release) -> list[RouteSnapshot]:
        """Give the routes of a closed circuit's release plan their wave slots (fenced
        route transitions; a route that moved on is left alone): the routes moved. Raises
        a RecoveryError when the routes cannot be read (send it again)."""
        arrived = self._clock.now()
        moved = await self._runner.release_one(release)
        first = min((slot.release_at for slot in release[1].slots), default=arrived)
        log.info(
            "released %d of %d routes of %s: arrived %+.0f ms, armed %+.0f ms from the first slot",
            len(moved), len(release[1]), release[0].label, _ms(arrived - first),
            _ms(self._clock.now() - first),
        )  # fmt: skip
        return moved

    async def run_many(self, items: Sequence[tuple[str, RouteCommand]]) -> list[Outcome]:
        """Carry out a batch of (route id, command), each route's in the given order;
        per item, the snapshot once it took effect or the exception it raised."""
        return await self._runner.run(items)

    async def _run(self, route_id: str, command: RouteCommand) -> RouteSnapshot:
        (outcome,) = await self._runner.run([(route_id, command)])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _context(self) -> RouteContext:
        return RouteContext(self._clock.now(), self.settings)


@dataclass(frozen=True, slots=True)
class ServiceOnLoop:
    """A route service called from a worker thread: each batch runs on the service's
    event loop (so under its route locks) and the thread waits for its outcomes."""

    service: RouteService
    loop: asyncio.AbstractEventLoop

    def commands(
        self, host_id: str | None, items: Sequence[tuple[str, RouteCommand]]
    ) -> list[Outcome]:
        future = asyncio.run_coroutine_threadsafe(self.service.run_many(items), self.loop)
        return future.result()


def _ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000
