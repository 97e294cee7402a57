"""`RouteHandle`: the route API of one route, as an orchestrator calls it.

Every call becomes a request value (a RouteCommand, or a read) sent to the host that owns
the route through that host's HostBatcher (actors/hosting/batcher.py): concurrent calls from
one process share one Ray call per host. Every call returns the authoritative snapshot
(reads: the snapshot or the history); a rejected one raises the typed error with no
effect (StaleGenerationError, InvalidStateError, ...).

Retried calls: hosts run with `max_task_retries=-1`, so a batch in flight when its host
dies is sent again to the restarted host. If an item's first attempt had committed, its
retry is rejected by the generation fence and the handle raises the
TransitionRejectedError (StaleGenerationError when the first attempt moved the
generation, InvalidStateError when it only moved the state), carrying
`actual_generation` and `actual_state`. `committed_by_retry` tells a caller whether such
a rejection leaves the route exactly where its own call would have (then re-read
`snapshot()` and carry on).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import ray

from actors.engine.notice_lifecycle import CancelOutcome
from actors.errors import RecoveryError, TransitionRejectedError
from actors.hosting.batcher import BatcherPool, HostRequest, ReadHistory, ReadSnapshot
from actors.routes.commands import (
    CancelWait,
    Close,
    ReportFailure,
    ReportSuccess,
    Resume,
    RetryNow,
    SkipNow,
    Start,
    StartFresh,
    StopRoute,
)
from actors.routes.models import AttemptRecord, RouteSnapshot
from actors.routes.profiles import RouteProfile
from catalogue import Classification, Evidence
from policy import TurnEvidence


def committed_by_retry(
    error: TransitionRejectedError, *, generation: int, states: Collection[str]
) -> bool:
    """Whether a rejected call may be the retry of its own committed first attempt: the
    route is at the generation and in one of the states that call would have produced.
    (Another writer could produce the same; the snapshot is authoritative either way.)"""
    return error.actual_generation == generation and error.actual_state in states


@dataclass(frozen=True, slots=True)
class RouteHandle:
    """The route API of one route, called on the host that owns it.

    Every command takes the generation the caller last saw and raises
    StaleGenerationError (no effect) when the route has moved on; every call answers the
    route's authoritative snapshot and raises StoreUnavailableError when Redis failed
    (nothing written). Rejections carry `actual_generation` and `actual_state`. Every
    command carries a request id (`request_id=`, else a new one per call): a request the
    route applied before is not applied again and answers its first outcome's snapshot
    (how a call Ray re-sends to a restarted host is told apart from a new one)."""

    route_id: str
    host: Any  # a Ray actor handle of RouteHost
    batchers: BatcherPool
    # The route's owning host as it is now (a host killed for good is recreated by the
    # installation's owner under the same name); None: the handle stays on `host`.
    resolve: Callable[[], Any] | None = None
    _moved_to: list[Any] = field(default_factory=list, compare=False, repr=False)

    async def start(
        self,
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
        """A new route on the profile's first eligible candidate, generation 1; its
        `next_step` says what to do (`run`: launch the turn on its candidate; `wait`: the
        start is parked on an open circuit and a dispatch will come). Raises
        StaleGenerationError when the route exists already (start fresh or close it).
        `caller`: the name of what drives the route (`[A-Za-z0-9._-]{1,128}`, else
        InvalidIdentifierError). `provider_session_id`: the agent's own session id, for a
        provider-native resume. `task_id`: the orchestrator's task of the session: its
        transcript retry notices are written for that task (none without one), and a
        cancel checks it. `utility`: a utility invocation (ephemeral, reports of another
        invocation are stale; the caller name "utility" implies it).
        `recovery_deadline`: an aware time no wait or circuit park outlives; at it the
        route stops (`action_required`, `next_step` manual).
        `profile_id` instead of `profile`: the route follows that stored profile
        (`runtime.profiles`), deciding each time with its current version, recorded in
        each attempt; a deleted or invalid one stops the route, naming it, and one
        missing at the start raises ProfileNotFoundError (InvalidStoredProfileError).
        Raises NoEligibleCandidateError when no candidate is eligible, StoreUnavailableError
        when Redis failed (nothing was written)."""
        command = Start(
            profile, caller, invocation_id, provider_session_id, _id(request_id), task_id,
            utility, recovery_deadline, profile_id,
        )  # fmt: skip
        return await self._snapshot(command)

    async def report_failure(
        self,
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
        """A failed turn: classify `evidence` (unless it already is a Classification),
        apply the candidate's policy and persist the decision (retry_wait, waiting_for_reset,
        switching to the next candidate, or action_required) before returning. `turn` is
        what was observed of the turn (None: nothing recorded, which is unsafe to replay).
        Raises InvalidStateError when it is not active, retrying or switching, and
        InvalidClassificationError (naming the field) for a Classification the catalogue
        could not have produced (catalogue/boundary.py); its excerpt is sanitised again.
        `attempt`: the attempt ordinal the report is about (the snapshot's
        `attempt_ordinal` when that attempt was dispatched); a report about an earlier one
        raises StaleOrdinalError. None: the route's current attempt."""
        command = ReportFailure(
            expected_generation, evidence, turn, caller, invocation_id, provider_session_id,
            attempt, _id(request_id), utility,
        )  # fmt: skip
        return await self._snapshot(command)

    async def report_success(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        """The turn succeeded: the route is active again and its retry budget restarts.
        Raises InvalidStateError when it is not active, retrying or switching."""
        return await self._snapshot(ReportSuccess(expected_generation, _id(request_id)))

    async def retry_now(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        """Start the pending attempt now instead of at its deadline (it is dispatched as a
        timer's would be; on an open circuit only when it may probe, else it stays parked).
        Raises InvalidStateError when it is not waiting."""
        return await self._snapshot(RetryNow(expected_generation, _id(request_id)))

    async def skip_now(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        """Give up the wait and switch to the next eligible candidate (a new generation), or
        stop when none is left. Raises InvalidStateError when it is not waiting."""
        return await self._snapshot(SkipNow(expected_generation, _id(request_id)))

    async def cancel_wait(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        """Cancel a pending wait: the route goes to action_required. With no wait pending it
        changes nothing."""
        return await self._snapshot(CancelWait(expected_generation, _id(request_id)))

    async def stop(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        """Stop automatic recovery (action_required); a stopped route stays as it is.
        Raises InvalidStateError when it is closed or was never started."""
        return await self._snapshot(StopRoute(expected_generation, _id(request_id)))

    async def resume(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        """Leave action_required on the same candidate, generation and cycle (active).
        Raises InvalidStateError when it is not action_required, NoEligibleCandidateError
        when it has no candidate."""
        return await self._snapshot(Resume(expected_generation, _id(request_id)))

    async def start_fresh(
        self,
        expected_generation: int,
        profile: RouteProfile | None = None,
        *,
        request_id: str | None = None,
        recovery_deadline: datetime | None = None,
        profile_id: str | None = None,
    ) -> RouteSnapshot:
        """Leave action_required in a new generation on the first eligible candidate of
        `profile` or of the stored profile `profile_id` (neither: the route's own, for a
        route following a stored profile its current version), with a new retry cycle
        (`recovery_deadline`: a new one; None keeps the route's). Raises
        InvalidStateError when it is not action_required, NoEligibleCandidateError when
        no candidate is eligible."""
        command = StartFresh(
            expected_generation, profile, _id(request_id), recovery_deadline, profile_id
        )
        return await self._snapshot(command)

    async def close(
        self, expected_generation: int, *, request_id: str | None = None
    ) -> RouteSnapshot:
        """Close the route for good: it takes no further command and expires after the
        configured retention; closing it again changes nothing."""
        return await self._snapshot(Close(expected_generation, _id(request_id)))

    async def snapshot(self) -> RouteSnapshot:
        """The route's authoritative snapshot (state "none", generation 0, when it was
        never started or has expired). Raises StoreUnavailableError when Redis failed."""
        return await self._snapshot(ReadSnapshot())

    async def history(self) -> list[AttemptRecord]:
        """The route's append-only attempt history, oldest first. Raises
        StoreUnavailableError when Redis failed."""
        answer: list[AttemptRecord] = await self._send(ReadHistory())
        return answer

    async def cancel_transient_retry(
        self, task_id: str, principal: str | None = None
    ) -> CancelOutcome:
        """Cancel this session's transient retry for `principal`, with no expected
        generation (it is idempotent). The task-session pair is authorised before any
        retry state or notice is read (RECOVERY_AUTHORISER, else the task recorded at
        start): NotAuthorisedError, the same for a denied pair and one that does not
        exist. Then the session's retry notices are always retired; with a retry loop
        running, the route also moves to action_required (its timer disarmed) and a
        manual-recovery message with Resume and Start fresh is created (`active` True).
        With none, it is a cleanup and `active` is False."""
        host = self._moved_to[-1] if self._moved_to else self.host
        outcome: CancelOutcome | RecoveryError = await host.cancel_transient_retry.remote(
            task_id, self.route_id, principal
        )
        if isinstance(outcome, RecoveryError):
            raise outcome
        return outcome

    async def _snapshot(self, request: HostRequest) -> RouteSnapshot:
        answer: RouteSnapshot = await self._send(request)
        return answer

    async def _send(self, request: HostRequest) -> Any:
        host = self._moved_to[-1] if self._moved_to else self.host
        try:
            return await self.batchers.for_host(host).call(self.route_id, request)
        except ray.exceptions.ActorDiedError:
            fresh = self._recreated_host(host)
            if fresh is None:
                raise
            # Sent once more, to the new host: a command the dead one had committed comes
            # back rejected by its fence (committed_by_retry), as for Ray's own retries.
            self._moved_to[:] = [fresh]
            return await self.batchers.for_host(fresh).call(self.route_id, request)

    def _recreated_host(self, dead: Any) -> Any | None:
        """The host now serving this route when it is another actor than the dead one."""
        if self.resolve is None:
            return None
        try:
            fresh = self.resolve()
        except ValueError:  # not recreated (yet): the caller sees the actor's death
            return None
        return None if fresh._actor_id == dead._actor_id else fresh


def _id(request_id: str | None) -> str:
    """The caller's request id, else a new one: a call Ray re-sends (a host restarted with
    it in flight) carries the same id, so it is applied once."""
    return request_id if request_id is not None else uuid.uuid4().hex
