"""Two processes write one session's notices: the owning host, and an rq worker's engine (a
dispatch job's NotDispatched leaves the route waiting for its redelivery, and the worker
writes that attempt's notice). Each has its own session guards, so a guard cannot order a
write in one against a retirement in the other: the write is fenced on the route itself.

The race: the worker's write lists the transcript after the host's cancel retired the
session's notice, so it creates one for an attempt that was cancelled. The created notice
must not outlive the write: the writer reads the route after its create and withdraws the
notice when the route no longer runs that attempt. And a worker that only wrote for the
host's session keeps no entry of it in its own guard table; a slow notice write holds no
route lock; a burst of cancels runs a few at a time. Gates (asyncio events) place the
calls; nothing sleeps. On fakeredis and on
the session's real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from actors.clock import ManualClock
from actors.engine.authorisers import RecordedTaskAuthoriser
from actors.engine.notice_lifecycle import CANCEL_CONCURRENCY, RouteNotices
from actors.engine.schedulers import ManualScheduler
from actors.engine.service import RouteService
from actors.engine.session_guards import SessionGuards
from actors.engine.session_notices import SessionNotices
from actors.keys import AttemptFence
from actors.routes.commands import ReportFailure, ReturnUnsent, RouteCommand
from actors.routes.models import RouteSnapshot
from actors.store.redis_transcript import RedisTranscript
from actors.store.route_store import RouteStore
from actors.store.transcript import TranscriptMessage
from tests.actors.conftest import Backend
from tests.actors.engine.transcript_fakes import FaultyTranscript, MemoryTranscript
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import overloaded, safe_turn, seed_profile

TASK = "task-1"
R = "route-1"
TIMEOUT_S = 10.0  # a catastrophe guard: every step here takes milliseconds


@dataclass
class Processes:
    """A host's service and a worker engine's, one store and one transcript between them;
    the worker's calls to the transcript pass through `gated`."""

    host: RouteService
    worker: RouteService
    gated: FaultyTranscript
    transcript: RedisTranscript
    backend: Backend
    host_guards: SessionGuards
    worker_guards: SessionGuards

    async def retrying(self) -> RouteSnapshot:
        """The route started with a task, failed, and its retry dispatched (the host wrote
        and kept its notice)."""
        await self.host.start(
            R, seed_profile(), caller="kanban", invocation_id=f"inv-{R}", task_id=TASK
        )
        await self.host.report_failure(
            R, 1, overloaded(), safe_turn(), caller="kanban", invocation_id=f"inv-{R}"
        )
        return await self.fire()

    async def fire(self) -> RouteSnapshot:
        """The host's timer fires the route's pending attempt at its deadline."""
        pending = await self.host.snapshot(R)
        assert pending.deadline is not None
        self.backend.clock.set(max(self.backend.clock.now(), pending.deadline))
        return await self.host.fire_due(AttemptFence(R, 1, pending.attempt_ordinal))

    async def notices(self) -> list[TranscriptMessage]:
        listed = await self.transcript.list_session_messages(TASK, R)
        return [m for m in listed if m.metadata.get("retrying") is True]


def notices_of(
    store: RouteStore,
    transcript: RedisTranscript | FaultyTranscript,
    guards: SessionGuards,
    *,
    owns_sessions: bool,
) -> RouteNotices:
    """One process's notices: its own guards around the shared transcript, wired as
    actors/engine/notice_setup.py wires a host's (owns_sessions) and a worker's."""

    async def recorded_task(session_id: str) -> str | None:
        return (await store.snapshot(session_id)).task_id

    authoriser = RecordedTaskAuthoriser(recorded_task)
    notices = SessionNotices(transcript, guards, owns_sessions=owns_sessions)
    return RouteNotices(notices, authoriser, read=store.snapshot)


@asynccontextmanager
async def processes(backend: Backend) -> AsyncIterator[Processes]:
    async with backend.store() as store:
        transcript = RedisTranscript(
            backend.raw(), clock=backend.clock, keys=backend.keys, owns_client=True
        )
        gated = FaultyTranscript(transcript)
        host_guards, worker_guards = (
            SessionGuards(backend.clock, ManualScheduler(backend.clock)) for _ in range(2)
        )
        hosts = notices_of(store, transcript, host_guards, owns_sessions=True)
        workers = notices_of(store, gated, worker_guards, owns_sessions=False)
        host = RouteService(store, backend.clock, notices=hosts)
        worker = RouteService(store, backend.clock, notices=workers)
        try:
            yield Processes(host, worker, gated, transcript, backend, host_guards, worker_guards)
        finally:
            await transcript.aclose()


def test_a_workers_notice_write_racing_the_hosts_cancel_leaves_no_notice(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with processes(backend) as both:
            fired = await both.retrying()
            [shown] = await both.notices()
            assert shown.metadata["attempt_ordinal"] == fired.attempt_ordinal
            listing = both.gated.gate("list")  # the worker's write waits before its list
            unsent = ReturnUnsent(fired.generation, fired.attempt_ordinal, "agent pool full")
            redelivery = asyncio.create_task(both.worker.run_many([(R, unsent)]))
            await asyncio.wait_for(listing.entered.wait(), TIMEOUT_S)
            waiting = await both.host.snapshot(R)
            assert (waiting.state, waiting.redeliveries) == ("retry_wait", 1)

            cancelled = await both.host.cancel_transient_retry(TASK, R, None)  # the user's Cancel
            assert cancelled.active
            assert await both.notices() == []  # the host retired the notice

            listing.release.set()  # the worker lists now: it sees no notice, and creates one
            [outcome] = await asyncio.wait_for(redelivery, TIMEOUT_S)
            assert isinstance(outcome, RouteSnapshot)
            assert "create" in both.gated.calls, "the race this test is about happened"
            assert await both.notices() == [], "a cancelled attempt's notice outlived its write"
            route = await both.host.snapshot(R)
            assert (route.state, route.next_step) == ("action_required", "manual")

    asyncio.run(scenario())


def test_a_workers_notice_for_the_attempt_the_route_still_waits_on_stays_and_is_the_hosts(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        async with processes(backend) as both:
            fired = await both.retrying()
            unsent = ReturnUnsent(fired.generation, fired.attempt_ordinal, "agent pool full")
            [outcome] = await both.worker.run_many([(R, unsent)])
            assert isinstance(outcome, RouteSnapshot)
            assert outcome.state == "retry_wait"
            [shown] = await both.notices()
            assert (shown.metadata["generation"], shown.metadata["attempt_ordinal"]) == (
                fired.generation, fired.attempt_ordinal,
            )  # fmt: skip
            # The host owns the session; the worker, which only wrote for it, keeps nothing
            # (the host's retirement would never reach its table).
            assert both.host_guards.counts()["guards_owned"] == 1
            assert both.worker_guards.counts()["guards"] == 0
            redelivered = await both.fire()
            assert (redelivered.state, redelivered.attempt_ordinal) == (
                "retrying", fired.attempt_ordinal,
            )  # fmt: skip
            await both.host.report_success(R, fired.generation)
            assert await both.notices() == []
            assert both.host_guards.counts()["guards_owned"] == 0

    asyncio.run(scenario())


def test_a_slow_notice_write_holds_no_route_lock(backend: Backend) -> None:
    """The store calls of a notice run after the round's route locks are released: while
    one is held at the transcript, the next transition of the same route commits."""

    async def scenario() -> None:
        async with processes(backend) as both:
            await both.worker.start(
                R, seed_profile(), caller="kanban", invocation_id=f"inv-{R}", task_id=TASK
            )
            listing = both.gated.gate("list")  # the failure's notice write waits at its list
            failure = ReportFailure(1, overloaded(), safe_turn(), "kanban", f"inv-{R}")
            failed = asyncio.create_task(both.worker.run_many([(R, failure)]))
            await asyncio.wait_for(listing.entered.wait(), TIMEOUT_S)
            # the same route's next transition, through the same service and its locks
            retried = await asyncio.wait_for(both.worker.retry_now(R, 1), TIMEOUT_S)
            assert retried.state == "retrying"
            listing.release.set()
            await asyncio.wait_for(failed, TIMEOUT_S)

    asyncio.run(scenario())


def test_a_burst_of_cancels_is_carried_out_a_few_at_a_time() -> None:
    """Fifty cancels at once: at most CANCEL_CONCURRENCY are past their turn together (the
    others would otherwise all wait on the store's bounded pool). Without the bound every
    task queued before the waiter resumes would have entered: the peak would be fifty."""

    async def scenario() -> None:
        inside: list[str] = []
        peak = 0
        full, release = asyncio.Event(), asyncio.Event()

        class SlowAuthoriser:
            async def authorise(self, task_id: str, session_id: str, principal: str | None) -> bool:
                nonlocal peak
                inside.append(session_id)
                peak = max(peak, len(inside))
                if len(inside) == CANCEL_CONCURRENCY:
                    full.set()
                await release.wait()
                inside.remove(session_id)
                return True

        clock = ManualClock(T0)
        guards = SessionGuards(clock, ManualScheduler(clock))
        notices = RouteNotices(SessionNotices(MemoryTranscript(clock), guards), SlowAuthoriser())

        async def read(session_id: str) -> RouteSnapshot:
            return RouteSnapshot.absent(session_id)  # no loop: each cancel only cleans up

        async def run(session_id: str, command: RouteCommand) -> RouteSnapshot:
            raise AssertionError(f"nothing to stop: {session_id} {command}")

        cancels = [
            asyncio.create_task(
                notices.cancel_transient_retry(TASK, f"s{n}", None, read=read, run=run)
            )
            for n in range(50)
        ]
        await asyncio.wait_for(full.wait(), TIMEOUT_S)
        assert peak == CANCEL_CONCURRENCY
        release.set()
        done = await asyncio.wait_for(asyncio.gather(*cancels), TIMEOUT_S)
        assert [outcome.active for outcome in done] == [False] * 50
        assert peak == CANCEL_CONCURRENCY

    asyncio.run(scenario())
