"""Transcript retry notices through the route service (actors/engine/notice_lifecycle.py):
the seed's notice scenarios, a delivered dispatch as the session's accepted prompt, a
cancel's authorisation, the port failing under transitions that must still succeed, and
1,000 sessions of seeded churn through the service and the Redis transcript.

Each test runs on fakeredis and on the session's real Redis (both the routes and the
transcript), with a ManualClock and a ManualScheduler: nothing sleeps."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import pytest
from pydantic import JsonValue

from actors.engine.authorisers import RecordedTaskAuthoriser
from actors.engine.notice_lifecycle import RouteNotices
from actors.engine.schedulers import ManualScheduler
from actors.engine.service import RouteService
from actors.engine.session_guards import LATE_EVENT_FENCE, SessionGuards
from actors.engine.session_notices import SessionNotices
from actors.errors import NotAuthorisedError, TransitionRejectedError
from actors.keys import AttemptFence
from actors.routes.models import RouteSnapshot
from actors.routes.notices import RECOVERY_KIND, RESUME, START_FRESH
from actors.routes.profiles import ConcreteProfile
from actors.store.redis_transcript import RedisTranscript
from actors.store.transcript import TranscriptMessage
from tests.actors.conftest import Backend
from tests.actors.engine.transcript_fakes import FaultyTranscript
from tests.actors.route_scenarios import overloaded, safe_turn, seed_profile

TASK = "task-1"


@dataclass
class Rig:
    service: RouteService
    notices: RouteNotices
    port: CheckedTranscript
    guards: SessionGuards
    scheduler: ManualScheduler
    backend: Backend
    reads: list[str]

    async def start(self, route_id: str, task: str | None = TASK) -> RouteSnapshot:
        return await self.service.start(
            route_id, seed_profile(), caller="kanban", invocation_id=f"inv-{route_id}",
            task_id=task,
        )  # fmt: skip

    async def fail(self, route_id: str) -> RouteSnapshot:
        generation = (await self.service.snapshot(route_id)).generation
        return await self.service.report_failure(
            route_id, generation, overloaded(), safe_turn(), caller="kanban",
            invocation_id=f"inv-{route_id}",
        )  # fmt: skip

    async def fire(self, route_id: str) -> RouteSnapshot:
        pending = await self.service.snapshot(route_id)
        assert pending.deadline is not None, pending
        self.backend.clock.set(max(self.backend.clock.now(), pending.deadline))
        return await self.service.fire_due(
            AttemptFence(route_id, pending.generation, pending.attempt_ordinal)
        )

    async def succeed(self, route_id: str) -> RouteSnapshot:
        generation = (await self.service.snapshot(route_id)).generation
        return await self.service.report_success(route_id, generation)

    async def deliver(self, route_id: str, generation: int, ordinal: int) -> None:
        """The dispatch job's announcement that attempt (generation, ordinal) was delivered,
        as the owning host follows it (RouteHost's wake follower)."""
        attempt = AttemptFence(route_id, generation, ordinal)
        await self.notices.delivered([attempt], self.service.snapshot)

    async def messages(self, route_id: str, task: str = TASK) -> list[TranscriptMessage]:
        return await self.port.inner.list_session_messages(task, route_id)

    async def retrying(self, route_id: str, task: str = TASK) -> list[TranscriptMessage]:
        return [
            m for m in await self.messages(route_id, task) if m.metadata.get("retrying") is True
        ]


class CheckedTranscript(FaultyTranscript):
    """Counts every notice write for an attempt the session's guard had retired (a retired
    notice recreated): the writes run under the guard, so the check is exact."""

    guards: SessionGuards | None = None
    retired_writes = 0

    def _check(self, session_id: str, metadata: dict[str, JsonValue]) -> None:
        generation, ordinal = metadata.get("generation"), metadata.get("attempt_ordinal")
        if metadata.get("retrying") is not True or self.guards is None:
            return  # a recovery message is written after its retirement, by design
        assert isinstance(generation, int)
        assert isinstance(ordinal, int)
        if self.guards.is_late(AttemptFence(session_id, generation, ordinal)):
            self.retired_writes += 1

    async def create_message(
        self, task_id: str, session_id: str, *, kind: str, content: str,
        metadata: dict[str, JsonValue], turn_id: str | None = None,
    ) -> TranscriptMessage:  # fmt: skip
        created = await super().create_message(
            task_id, session_id, kind=kind, content=content, metadata=metadata, turn_id=turn_id
        )
        self._check(session_id, metadata)
        return created

    async def update_message(
        self, message_id: str, content: str, metadata: dict[str, JsonValue]
    ) -> TranscriptMessage:
        updated = await super().update_message(message_id, content, metadata)
        self._check(updated.session_id, metadata)
        return updated


@asynccontextmanager
async def rig(backend: Backend) -> AsyncIterator[Rig]:
    async with backend.store() as store:
        transcript = RedisTranscript(
            backend.raw(), clock=backend.clock, keys=backend.keys, owns_client=True
        )
        port = CheckedTranscript(transcript)
        scheduler = ManualScheduler(backend.clock)
        guards = SessionGuards(backend.clock, scheduler)
        port.guards = guards
        reads: list[str] = []

        async def recorded_task(session_id: str) -> str | None:
            reads.append(session_id)
            return (await store.snapshot(session_id)).task_id

        notices = RouteNotices(SessionNotices(port, guards), RecordedTaskAuthoriser(recorded_task))
        service = RouteService(store, backend.clock, notices=notices)
        yield Rig(service, notices, port, guards, scheduler, backend, reads)


def run(backend: Backend, scenario: Callable[[Rig], Awaitable[None]]) -> None:
    async def main() -> None:
        async with rig(backend) as made:
            await scenario(made)

    asyncio.run(main())


# -- the seed's scenarios ------------------------------------------------------------------


def test_a_retry_that_succeeds_leaves_no_notice_when_the_session_idles_or_reloads(
    backend: Backend,
) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        await r.fail("s1")
        [notice] = await r.retrying("s1")
        assert notice.metadata["retry_ordinal"] == 1
        assert "Cancel" in notice.content
        await r.fire("s1")
        assert [m.id for m in await r.retrying("s1")] == [notice.id]  # still retrying
        assert (await r.succeed("s1")).state == "active"
        assert await r.retrying("s1") == []  # idle, or a reload: nothing to render
        assert await r.messages("s1") == []

    run(backend, scenario)


def test_a_concrete_profiles_interactive_retries_write_and_retire_through_the_same_path(
    backend: Backend,
) -> None:
    """A task chat on one concrete agent (the built-in interactive policy: 5 retries from
    5 s): its notice says retry N of 5 on its provider, is reused, and goes with the
    success."""

    async def scenario(r: Rig) -> None:
        chat = ConcreteProfile(id="claude", agent="claude-acp", provider="anthropic")
        await r.service.start("chat", chat, caller="kanban", invocation_id="inv-chat",
                              task_id=TASK)  # fmt: skip
        first = await r.fail("chat")
        assert (first.state, first.retry_ordinal, first.retry_max) == ("retry_wait", 1, 5)
        [notice] = await r.retrying("chat")
        assert (notice.metadata["retry_ordinal"], notice.metadata["retry_max"]) == (1, 5)
        assert notice.metadata["provider"] == "anthropic"
        assert "retry 1 of 5" in notice.content
        await r.fire("chat")
        await r.fail("chat")
        [again] = await r.retrying("chat")
        assert (again.id, again.metadata["retry_ordinal"]) == (notice.id, 2)
        await r.fire("chat")
        assert (await r.succeed("chat")).state == "active"
        assert await r.retrying("chat") == []

    run(backend, scenario)


def test_attempt_n_plus_1_updates_the_same_notice(backend: Backend) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        first = await r.fail("s1")
        [notice] = await r.retrying("s1")
        await r.fire("s1")
        second = await r.fail("s1")
        [again] = await r.retrying("s1")
        assert (again.id, again.created_at) == (notice.id, notice.created_at)
        assert (again.metadata["retry_ordinal"], again.metadata["attempt_ordinal"]) == (
            2, second.attempt_ordinal,
        )  # fmt: skip
        assert second.attempt_ordinal == first.attempt_ordinal + 1
        assert r.port.calls.count("create") == 1

    run(backend, scenario)


def test_a_cancel_after_the_loop_ended_retires_a_stale_notice_and_creates_no_message(
    backend: Backend,
) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        await r.fail("s1")
        await r.fire("s1")
        r.port.failing.add("delete")  # the success's cleanup fails: the notice stays
        assert (await r.succeed("s1")).state == "active"
        assert len(await r.retrying("s1")) == 1
        r.port.failing.clear()
        outcome = await r.service.cancel_transient_retry(TASK, "s1", "alice")
        assert outcome.active is False
        assert outcome.snapshot.state == "active"
        assert await r.messages("s1") == []  # retired; no recovery message

    run(backend, scenario)


def test_a_cancel_during_the_loop_retires_the_notice_and_offers_resume_and_start_fresh(
    backend: Backend,
) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        await r.fail("s1")
        outcome = await r.service.cancel_transient_retry(TASK, "s1", "alice")
        assert outcome.active is True
        assert outcome.snapshot.state == "action_required"
        assert await r.service.schedules() == []  # the timer's schedule is gone
        assert await r.retrying("s1") == []
        [message] = await r.messages("s1")
        assert message.kind == RECOVERY_KIND
        assert message.metadata["actions"] == [RESUME, START_FRESH]
        again = await r.service.cancel_transient_retry(TASK, "s1", "alice")
        assert again.active is False  # idempotent: a cleanup, no second message
        assert len(await r.messages("s1")) == 1

    run(backend, scenario)


def test_a_cancel_of_a_dispatched_retry_stops_the_route(backend: Backend) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        await r.fail("s1")
        assert (await r.fire("s1")).state == "retrying"
        outcome = await r.service.cancel_transient_retry(TASK, "s1", None)
        assert (outcome.active, outcome.snapshot.state) == (True, "action_required")
        assert await r.retrying("s1") == []

    run(backend, scenario)


def test_denied_and_foreign_cancels_are_indistinguishable_and_read_no_retry_state(
    backend: Backend,
) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        await r.fail("s1")
        r.port.calls.clear()
        errors = []
        for task, session in (("task-other", "s1"), (TASK, "no-such-session"), ("x", "y")):
            with pytest.raises(NotAuthorisedError) as caught:
                await r.service.cancel_transient_retry(task, session, "mallory")
            errors.append((type(caught.value), caught.value.args[1:]))
        assert r.port.calls == []  # no notice read
        assert len({error[0] for error in errors}) == 1
        assert r.reads == ["s1", "no-such-session", "y"]  # the authoriser's own lookup only
        assert (await r.service.snapshot("s1")).state == "retry_wait"  # untouched
        assert len(await r.retrying("s1")) == 1

    run(backend, scenario)


def test_one_pair_foreign_and_then_denied_gets_the_same_error_and_message(
    backend: Backend,
) -> None:
    """The pair (task-x, s1) before s1 exists (foreign) and once s1 runs task-1 with a
    notice (denied): the caller cannot tell them apart, and nothing but the authoriser's
    own lookup is read either time."""

    async def scenario(r: Rig) -> None:
        caught: list[NotAuthorisedError] = []
        for prepare in (None, "start"):
            if prepare == "start":
                await r.start("s1")
                await r.fail("s1")
            r.port.calls.clear()
            with pytest.raises(NotAuthorisedError) as error:
                await r.service.cancel_transient_retry("task-x", "s1", "mallory")
            caught.append(error.value)
            assert r.port.calls == []  # no notice read
        foreign, denied = caught
        assert (type(foreign), str(foreign), foreign.args) == (
            type(denied), str(denied), denied.args,
        )  # fmt: skip
        assert r.reads == ["s1", "s1"]  # the authoriser's own lookup only
        assert (await r.service.snapshot("s1")).state == "retry_wait"
        assert len(await r.retrying("s1")) == 1

    run(backend, scenario)


def test_a_route_without_a_task_writes_no_notice_and_cannot_be_cancelled(
    backend: Backend,
) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1", task=None)
        await r.fail("s1")
        assert r.port.calls == []
        with pytest.raises(NotAuthorisedError):
            await r.service.cancel_transient_retry(TASK, "s1", None)

    run(backend, scenario)


# -- a delivered dispatch ------------------------------------------------------------------


def test_a_delivered_dispatch_is_the_sessions_accepted_prompt_until_its_outcome(
    backend: Backend,
) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        await r.fail("s1")
        dispatched = await r.fire("s1")
        attempt = AttemptFence("s1", dispatched.generation, dispatched.attempt_ordinal)
        await r.deliver("s1", dispatched.generation, dispatched.attempt_ordinal)
        owned = r.guards.view("s1")
        assert owned is not None
        assert (owned.prompt, owned.retry) == (attempt, attempt)
        assert (await r.succeed("s1")).state == "active"
        retired = r.guards.view("s1")
        assert retired is not None
        assert (retired.prompt, retired.retry, retired.watermark) == (None, None, attempt)
        assert retired.fence_until is not None
        assert await r.retrying("s1") == []

    run(backend, scenario)


def test_a_delivered_dispatch_whose_next_failure_retries_hands_the_session_to_that_retry(
    backend: Backend,
) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        await r.fail("s1")
        dispatched = await r.fire("s1")
        await r.deliver("s1", dispatched.generation, dispatched.attempt_ordinal)
        again = await r.fail("s1")  # the delivered turn failed too: attempt N+1
        view = r.guards.view("s1")
        assert view is not None
        assert view.prompt is None  # the failed prompt is over once its retry is armed
        assert (view.retry, view.retry_armed) == (
            AttemptFence("s1", again.generation, again.attempt_ordinal), True,
        )  # fmt: skip

    run(backend, scenario)


def test_a_late_or_unconfirmed_delivery_owns_no_session(backend: Backend) -> None:
    """Deliveries announced after their attempt's outcome, for an attempt Redis never
    dispatched, for a route without a task, and after the session's entry was reclaimed:
    none owns its session (an owned entry would never be reclaimed)."""

    async def scenario(r: Rig) -> None:
        await r.start("done")
        await r.fail("done")
        done = await r.fire("done")
        await r.succeed("done")
        await r.deliver("done", done.generation, done.attempt_ordinal)  # after its outcome
        await r.start("next")
        await r.fail("next")
        first = await r.fire("next")
        second = await r.fail("next")
        await r.deliver("next", first.generation, first.attempt_ordinal)  # superseded
        await r.start("waiting")
        waiting = await r.fail("waiting")
        await r.deliver("waiting", waiting.generation, waiting.attempt_ordinal)  # not fired
        await r.start("plain", task=None)
        await r.fail("plain")
        plain = await r.fire("plain")
        await r.deliver("plain", plain.generation, plain.attempt_ordinal)  # no task
        views = {s: r.guards.view(s) for s in ("done", "next", "waiting", "plain")}
        assert all(v is None or v.prompt is None for v in views.values()), views
        assert views["plain"] is None
        next_view = views["next"]
        assert next_view is not None
        assert next_view.retry == AttemptFence("next", second.generation, second.attempt_ordinal)
        await r.start("gone")
        await r.fail("gone")
        gone = await r.fire("gone")
        await r.service.cancel_transient_retry(TASK, "gone", None)
        r.backend.clock.advance(LATE_EVENT_FENCE + timedelta(seconds=1))
        r.scheduler.run_due()
        assert r.guards.view("gone") is None  # reclaimed after its fence
        await r.deliver("gone", gone.generation, gone.attempt_ordinal)  # long after it all
        assert r.guards.view("gone") is None
        assert r.guards.counts()["guards_owned"] == 2  # "next" and "waiting": their retries

    run(backend, scenario)


# -- the port failing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "failing", [{"list"}, {"update"}, {"delete"}, {"create"}, {"list", "update", "delete"}]
)
def test_a_failing_port_never_fails_a_transition_nor_inserts_and_the_next_write_repairs(
    backend: Backend, failing: set[str]
) -> None:
    async def scenario(r: Rig) -> None:
        await r.start("s1")
        await r.fail("s1")  # one notice, written while the port worked
        await r.fire("s1")
        r.port.failing |= failing
        creates = r.port.calls.count("create")
        second = await r.fail("s1")  # the write fails part-way: the transition stands
        assert second.state == "retry_wait"
        assert r.port.calls.count("create") == creates + ("create" in failing) * 0
        assert len(await r.retrying("s1")) <= 1  # never a fallback insert
        r.port.failing.clear()
        await r.fire("s1")
        assert (await r.succeed("s1")).state == "active"  # the cleanup after it repairs
        assert await r.retrying("s1") == []

    run(backend, scenario)


# -- churn -----------------------------------------------------------------------------------

SESSIONS = 1000
STEPS = 6
CONCURRENT = 16  # sessions stepping at once (within the store's bounded pool)


@pytest.mark.integration
def test_a_thousand_sessions_of_seeded_churn_leave_no_notice_and_no_guard_past_its_fence(
    real_backend: Backend,
) -> None:
    """Random interleavings of failure, retry, delivered dispatch, success, cancel,
    superseding attempt (a second failure), stop, delete (close) and late provider events
    (a report or a delivery for a retired attempt), then every route closed: zero retrying
    messages, none written for a retired attempt, no session still owned, and no guard
    entry left past its fence."""
    chooser = random.Random(20261201)
    accepted: list[str] = []  # sessions a delivery owned

    async def deliver(r: Rig, snapshot: RouteSnapshot, ordinal: int) -> None:
        route_id, ordinal = snapshot.route_id, max(0, ordinal)
        before = r.guards.view(route_id)
        await r.deliver(route_id, snapshot.generation, ordinal)
        view = r.guards.view(route_id)
        if snapshot.state == "retrying" and ordinal == snapshot.attempt_ordinal:
            assert view is not None
            assert view.prompt == AttemptFence(route_id, snapshot.generation, ordinal)
            accepted.append(route_id)
        else:  # refused: the entry is as it was
            assert view == before

    async def step(r: Rig, route_id: str) -> None:
        snapshot = await r.service.snapshot(route_id)
        action = chooser.choice(
            ["fail", "fire", "deliver", "succeed", "cancel", "stop", "late", "close"]
        )
        try:
            if action == "fail" and snapshot.state in {"active", "retrying"}:
                await r.fail(route_id)
            elif action == "fire" and snapshot.state == "retry_wait":
                fired = await r.fire(route_id)
                if chooser.random() < 0.8:  # its dispatch is delivered at once
                    await deliver(r, fired, fired.attempt_ordinal)
            elif action == "deliver":  # on time when retrying, else a late delivery
                await deliver(r, snapshot, snapshot.attempt_ordinal - chooser.randrange(2))
            elif action == "succeed" and snapshot.state in {"active", "retrying"}:
                await r.succeed(route_id)
            elif action == "cancel":
                await r.service.cancel_transient_retry(TASK, route_id, None)
            elif action == "stop" and snapshot.state not in {"closed", "none"}:
                await r.service.stop(route_id, snapshot.generation)
            elif action == "late":  # a report for an attempt that was retired
                await r.service.report_failure(
                    route_id, max(0, snapshot.generation - 1), overloaded(), safe_turn(),
                    caller="kanban", invocation_id=f"inv-{route_id}",
                )  # fmt: skip
            elif action == "close" and snapshot.state != "closed":
                await r.service.close(route_id, snapshot.generation)
        except TransitionRejectedError:
            pass  # a late or stale event: the Redis fence refused it

    async def scenario(r: Rig) -> None:
        routes = [f"churn-{n}" for n in range(SESSIONS)]
        for route_id in routes:
            await r.start(route_id)
        bound = asyncio.Semaphore(CONCURRENT)

        async def bounded(route_id: str) -> None:
            async with bound:
                await step(r, route_id)

        for _ in range(STEPS):
            order = chooser.sample(routes, len(routes))
            await asyncio.gather(*(bounded(route_id) for route_id in order))
        for route_id in routes:  # the fleet ends: every session closed
            snapshot = await r.service.snapshot(route_id)
            if snapshot.state != "closed":
                await r.service.close(route_id, snapshot.generation)
        leaked = [m for route_id in routes for m in await r.retrying(route_id)]
        assert leaked == []
        assert r.port.retired_writes == 0  # no retired notice was ever written again
        # the churn did exercise the notices: many created, some reused for attempt N+1
        assert r.port.calls.count("create") > SESSIONS // 4
        assert r.port.calls.count("update") > 0
        assert len(accepted) > SESSIONS // 50  # and deliveries were accepted prompts
        assert r.guards.counts() == {
            "guards": r.guards.live_entries, "guards_owned": 0, "guards_past_fence": 0,
        }  # fmt: skip
        r.backend.clock.advance(LATE_EVENT_FENCE + timedelta(seconds=1))
        r.scheduler.run_due()
        assert r.guards.live_entries == 0  # every entry reclaimed after its fence

    run(real_backend, scenario)
