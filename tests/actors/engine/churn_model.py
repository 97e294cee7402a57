"""A churn driver for the notice lifecycle: rounds of concurrent host actions over many
sessions (failure, dispatch, success, cancel, stop, skip, delete, late provider events,
port faults, time), checked against what the seed promises.

Actions are planned in commit order (as a route's serial transitions would commit them)
and each round's actions then run concurrently, so they reach the session guards in any
order; the port yields a loop turn on every call so sessions interleave.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import JsonValue

from actors.clock import ManualClock
from actors.engine.notices import Resolution, WriteOutcome
from actors.engine.schedulers import ManualScheduler
from actors.engine.session_guards import LATE_EVENT_FENCE, ExecutionIdentity, SessionGuards
from actors.engine.session_notices import SessionNotices
from actors.keys import AttemptFence
from actors.routes.notices import NoticeContent, RetryFacts, retry_notice
from actors.store.transcript import TranscriptPort
from tests.actors.engine.transcript_fakes import FaultyTranscript

TASK = "task-1"
KINDS = (
    "fail", "fail", "fail", "deliver", "success", "cancel", "stop", "skip", "delete",
    "late", "late", "fault", "heal", "tick",
)  # fmt: skip
Action = tuple[str, int, int]  # (kind, session index, a free parameter)
Call = Callable[[], Awaitable[Any]]


@dataclass
class Session:
    name: str
    generation: int = 1
    ordinal: int = 0
    deleted: bool = False
    retired: list[tuple[AttemptFence, datetime, int]] = field(default_factory=list)
    live_retry: bool = False  # in commit order: the latest lifecycle step scheduled a retry
    dirty: bool = False  # a cleanup failed since the last clean forced one

    @property
    def attempt(self) -> AttemptFence:
        return AttemptFence(self.name, self.generation, self.ordinal)


@dataclass
class Churn:
    """One run: the lifecycle under test, its port, and what the checks saw."""

    port: TranscriptPort
    clock: ManualClock
    sessions: list[Session]
    faulty: FaultyTranscript = field(init=False)
    scheduler: ManualScheduler = field(init=False)
    notices: SessionNotices = field(init=False)
    violations: list[str] = field(default_factory=list)
    refused_late: int = 0
    written: int = 0

    seed: int = 0
    chooser: random.Random = field(init=False)

    def __post_init__(self) -> None:
        # Seeded: how long each store call takes (in loop turns) and in which order a
        # round's actions reach the host, so calls interleave differently every round.
        self.chooser = random.Random(self.seed)
        self.faulty = FaultyTranscript(self.port, yields=lambda: self.chooser.randrange(4))
        self.faulty.before_write = self._check_write
        self.scheduler = ManualScheduler(self.clock)
        self.notices = SessionNotices(self.faulty, SessionGuards(self.clock, self.scheduler))

    def _check_write(self, operation: str, _where: str, metadata: dict[str, JsonValue]) -> None:
        # Every notice write happens under its session's guard: the attempt it writes must
        # be neither retired nor superseded there, whatever raced it.
        fence = _fence_of(metadata)
        entry = self.notices.guards.entries.get(fence.route_id)
        if entry is None or entry.retired(fence) or entry.superseded(fence):
            self.violations.append(f"{operation} of a notice for retired attempt {fence}")

    async def run(self, rounds: Sequence[Sequence[Action]]) -> None:
        for index, actions in enumerate(rounds):
            planned: list[tuple[Session, Call]] = []
            for kind, which, parameter in actions:
                session = self.sessions[which % len(self.sessions)]
                planned.extend(
                    (session, call) for call in self._plan(kind, session, parameter, index)
                )
            faulted = bool(self.faulty.failing)  # the faults of the whole round, set by now
            order = list(range(len(planned)))
            self.chooser.shuffle(order)  # actions committed in plan order arrive in any
            started = {i: asyncio.ensure_future(planned[i][1]()) for i in order}
            results = await asyncio.gather(*(started[i] for i in range(len(planned))))
            for (session, _), result in zip(planned, results, strict=True):
                self._observe(session, result)
            if not faulted:
                await self._check_round()

    def _plan(self, kind: str, session: Session, parameter: int, round_index: int) -> list[Call]:
        if kind in ("fault", "heal", "tick"):
            self._change_world(kind, parameter)
            return []
        if kind == "late":
            return self._plan_late(session, round_index)
        if session.deleted:
            return []
        if kind == "fail":
            session.ordinal += 1
            session.live_retry = True
            fence = session.attempt
            return [lambda: self._fail(fence, parameter)]
        if kind == "deliver":
            identity = _identity(session.attempt)
            return [lambda: self.notices.accept_prompt(identity)]
        return self._plan_end(kind, session, round_index)

    def _change_world(self, kind: str, parameter: int) -> None:
        if kind == "fault":  # the parameter's low bits say which operations fail
            names = ("list", "create", "update", "delete")
            self.faulty.failing = {op for bit, op in enumerate(names) if parameter >> bit & 1}
        elif kind == "heal":
            self.faulty.failing = set()
        else:
            seconds = parameter % 90 if parameter % 7 else LATE_EVENT_FENCE.total_seconds() + 1
            self.scheduler.advance(timedelta(seconds=seconds))

    def _plan_end(self, kind: str, session: Session, round_index: int) -> list[Call]:
        """A step that ends the retry ownership of the session's current attempt."""
        notices, ended = self.notices, session.attempt
        session.retired.append((ended, self.clock.now(), round_index))
        session.live_retry = False
        if kind == "success":
            return [lambda: notices.retire(TASK, ended.route_id, attempt=ended)]
        if kind in ("cancel", "stop"):
            return [lambda: notices.retire(TASK, ended.route_id, attempt=ended, force=True)]
        if kind == "delete":
            session.deleted = True
            return [lambda: notices.delete_session(TASK, ended.route_id, attempt=ended)]
        # a skip: the loop of this generation ends, the next candidate starts (racing it)
        session.generation, session.ordinal = session.generation + 1, 0
        start = _identity(session.attempt)
        return [
            lambda: notices.retire(TASK, ended.route_id, attempt=ended, force=True),
            lambda: notices.accept_prompt(start),
        ]

    def _plan_late(self, session: Session, round_index: int) -> list[Call]:
        # A provider event for the latest retired attempt, still inside its race window
        # (later, the route's own durable fence refuses it before the guard is asked).
        if not session.retired:
            return []
        fence, at, retired_in = session.retired[-1]
        if self.clock.now() >= at + LATE_EVENT_FENCE:
            return []

        async def late() -> WriteOutcome | None:
            if self.clock.now() >= at + LATE_EVENT_FENCE:
                return None  # time passed in this round: the route's own fence refuses it
            outcome = await self.notices.write_attempt(TASK, fence, _notice(fence))
            if retired_in < round_index and outcome.status != "refused":
                self.violations.append(f"late write for {fence} was {outcome.status}")
            self.refused_late += outcome.status == "refused"
            return outcome

        return [late]

    async def _fail(self, fence: AttemptFence, parameter: int) -> WriteOutcome:
        outcome = await self.notices.write_attempt(TASK, fence, _notice(fence))
        if parameter % 5:  # most failed turns complete before the next action
            await self.notices.arm_retry(fence)
        return outcome

    def _observe(self, session: Session, result: Any) -> None:
        if isinstance(result, WriteOutcome):
            self.written += result.written
            if result.duplicates_failed or result.status == "failed":
                session.dirty = True  # a leftover may wait for a later cleanup
        elif isinstance(result, Resolution) and result.looked:
            session.dirty = not result.clean

    async def _check_round(self) -> None:
        """After a round without faults: a session whose latest step scheduled a retry shows
        exactly one notice, any other none (a session with a failed cleanup since its last
        clean one may show a leftover until a later cleanup, as the seed allows)."""
        for session in self.sessions:
            if session.dirty:
                continue
            left = len(await _retrying(self.port, session.name))
            expected = 1 if session.live_retry else 0
            if left != expected:
                self.violations.append(f"{session.name}: {left} notices, expected {expected}")

    async def finish(self) -> None:
        """Heal the port, retire every session (a stop), try a late write for each, let
        every fence run out: nothing may be left anywhere."""
        self.faulty.failing, self.faulty.failing_ids = set(), set()
        for session in self.sessions:
            resolution = await self.notices.retire(
                TASK, session.name, attempt=session.attempt, force=True
            )
            if not resolution.clean:
                self.violations.append(f"{session.name}: final cleanup {resolution}")
            late = await self.notices.write_attempt(TASK, session.attempt, _notice(session.attempt))
            if late.status != "refused":
                self.violations.append(f"{session.name}: write after the final stop {late}")
            if await _retrying(self.port, session.name):
                self.violations.append(f"{session.name}: notice left after the final stop")
        self.scheduler.advance(LATE_EVENT_FENCE + timedelta(seconds=1))


def _identity(fence: AttemptFence) -> ExecutionIdentity | None:
    return ExecutionIdentity.of(
        task_id=TASK, session_id=fence.route_id,
        execution_id=f"inv-{fence.generation}-{fence.ordinal}",
        generation=fence.generation, attempt_ordinal=fence.ordinal,
    )  # fmt: skip


def _notice(fence: AttemptFence) -> NoticeContent:
    made = retry_notice(RetryFacts(
        code="rate_limited", provider="openai", retry_ordinal=min(fence.ordinal, 10),
        retry_max=10, deadline=datetime(2026, 3, 1, 12, 5, tzinfo=UTC),
        generation=fence.generation, attempt_ordinal=fence.ordinal,
    ))  # fmt: skip
    # the session rides along, for the write check (an update names only the message)
    return NoticeContent(made.kind, made.content, {**made.metadata, "route": fence.route_id})


def _fence_of(metadata: dict[str, JsonValue]) -> AttemptFence:
    route, generation, ordinal = (
        metadata["route"],
        metadata["generation"],
        metadata["attempt_ordinal"],
    )
    assert isinstance(route, str)
    assert isinstance(generation, int)
    assert isinstance(ordinal, int)
    return AttemptFence(route, generation, ordinal)


async def _retrying(port: TranscriptPort, session_id: str) -> list[str]:
    listed = await port.list_session_messages(TASK, session_id)
    return [m.id for m in listed if m.metadata.get("retrying") is True]


def random_rounds(seed: int, sessions: int, rounds: int) -> list[list[Action]]:
    """Seeded rounds for the runs that do not go through Hypothesis (the real Redis)."""
    chooser = random.Random(seed)
    return [
        [(chooser.choice(KINDS), chooser.randrange(sessions), chooser.randrange(1 << 20))
         for _ in range(chooser.randint(1, 8))]
        for _ in range(rounds)
    ]  # fmt: skip
