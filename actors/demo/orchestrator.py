"""The simulated orchestrator: one asyncio task per session, driving its route through
the runtime's public route API (actors/hosting/handle.py) as a real orchestrator would.

A session starts its route on its profile, then runs 2-4 turns. Each attempt of a turn
runs on the route's current candidate (actors/demo/turns.py says how it ends) and is
reported with the generation the session last saw: a success ends the turn; a failure
returns the route's decision, and the session follows it —

- `retry_wait` / `waiting_for_reset`: wait until the demo dispatcher (called by the
  runtime in an rq worker when the deadline is reached) says to run the next attempt, for
  exactly that generation and attempt ordinal;
- `active` after a skip: run the next attempt on the new candidate (new generation);
- `action_required`: a manual action once per session (resume, start fresh, or close),
  then close.

Every fifth session is an interactive task chat (actors/demo/profiles.py): started with a
task id on a concrete profile, so its retries leave a transcript notice; while it waits
for a retry, it cancels the retry (`cancel_transient_retry`) half of the time, as a user
pressing Cancel would, and follows the route into manual recovery.

Once the demo's duration has passed no session starts a turn: each finishes the turn it
is in (its schedules fire and are dispatched as usual) and closes its route. The
orchestrator's own counters (conflicts, unexpected dispatches) are reported beside the
figures read from Redis.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from redis.asyncio import Redis

from actors.demo.demo_keys import DemoKeys
from actors.demo.dispatcher import DispatchRecord
from actors.demo.profiles import candidate_of, concrete_for, interactive, profile_for
from actors.demo.turns import SessionScript
from actors.errors import TransitionRejectedError
from actors.hosting.handle import RouteHandle
from actors.routes.models import RouteSnapshot
from actors.store.cancels import raise_if_cancelled
from policy import DynamicProfile

POP_TIMEOUT_S: Final = 1
RECHECK_S: Final = 5.0  # a waiting session re-reads its route this often (never a wait on it)
START_SPREAD_S: Final = 5.0
TURNS: Final = (2, 4)
MANUAL: Final = ("resume", "start_fresh", "close")
MANUAL_WEIGHTS: Final = (1, 2, 2)
WAITING: Final = frozenset({"retry_wait", "waiting_for_reset", "retrying"})

log = logging.getLogger(__name__)


@dataclass
class FleetControl:
    """Shared by the sessions: when to stop starting turns, and what went unexpected."""

    duration_s: float
    started: float = field(default_factory=time.monotonic)
    counters: Counter[str] = field(default_factory=Counter)

    @property
    def driving(self) -> bool:
        return time.monotonic() - self.started < self.duration_s


class DispatchInbox:
    """Pops the dispatcher's run-the-next-turn messages and hands each to its session."""

    def __init__(self, client: Redis, keys: DemoKeys, control: FleetControl) -> None:
        self._client = client
        self._keys = keys
        self._control = control
        self._queues: dict[str, asyncio.Queue[DispatchRecord]] = {}

    def queue(self, route_id: str) -> asyncio.Queue[DispatchRecord]:
        return self._queues.setdefault(route_id, asyncio.Queue())

    async def run(self) -> None:
        while True:
            popped = await self._client.blpop([self._keys.turns], timeout=POP_TIMEOUT_S)
            raise_if_cancelled()  # the fleet's teardown cancels this loop and waits for it
            if popped is None:
                continue
            record = DispatchRecord.model_validate_json(popped[1])
            if record.route_id not in self._queues:
                self._control.counters["dispatches_for_unknown_routes"] += 1
                continue
            self._queues[record.route_id].put_nowait(record)


@dataclass
class Session:
    """One orchestrator session and the route that carries it."""

    index: int
    route: RouteHandle
    script: SessionScript
    inbox: DispatchInbox
    control: FleetControl
    profile: DynamicProfile = field(init=False)
    manual_used: bool = False
    task_id: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.profile = profile_for(self.index)
        self.task_id = f"task-{self.index:04d}" if interactive(self.index) else None

    @property
    def route_id(self) -> str:
        return self.route.route_id

    @property
    def invocation_id(self) -> str:
        return f"inv-{self.route_id}"

    async def run(self) -> None:
        await asyncio.sleep(self.script.uniform(0.0, START_SPREAD_S))
        if not self.control.driving:
            return
        turns = self.script.randint(*TURNS)
        chosen = self.profile if self.task_id is None else concrete_for(self.index)
        snap: RouteSnapshot | None = await self.route.start(
            chosen, caller="kanban", invocation_id=self.invocation_id,
            provider_session_id=f"native-{self.route_id}", task_id=self.task_id,
        )  # fmt: skip
        if snap is not None and snap.state in WAITING:  # parked on its open circuits
            snap = await self._follow(snap)
        for number in range(turns):
            if snap is None:
                return
            if number and not self.control.driving:
                break
            snap = await self._turn(snap)
        if snap is not None:
            await self.route.close(snap.generation)

    async def _turn(self, snap: RouteSnapshot) -> RouteSnapshot | None:
        """Attempts until the turn succeeds (the route) or the route is closed (None)."""
        first = True
        while True:
            raise_if_cancelled()  # a route or Redis call may have swallowed the teardown's
            candidate = candidate_of(self.profile, snap.candidate_id)
            failure = self.script.attempt(candidate, _now(), first=first)
            first = False
            try:
                if failure is None:
                    return await self.route.report_success(snap.generation)
                self.control.counters[f"reported:{failure.kind}"] += 1
                snap = await self.route.report_failure(
                    snap.generation, failure.evidence, failure.turn, caller="kanban",
                    invocation_id=self.invocation_id,
                    provider_session_id=failure.provider_session_id,
                )  # fmt: skip
            except TransitionRejectedError:
                # The route moved on without us (e.g. a dispatch the runtime found
                # ambiguous): follow what it is now.
                self.control.counters["rejected_reports"] += 1
                snap = await self.route.snapshot()
            next_snap = await self._follow(snap)
            if next_snap is None:
                return None
            snap = next_snap

    async def _follow(self, snap: RouteSnapshot) -> RouteSnapshot | None:
        """Follow the decision until the route is ready for the next attempt."""
        while True:
            raise_if_cancelled()
            if snap.state in WAITING:
                snap = await self._wait_dispatch(snap)
            if snap.state == "action_required":
                snap = await self._manual(snap)
            if snap.state in ("active", "switching", "retrying"):
                return snap
            if snap.state in ("closed", "none"):
                return None

    async def _wait_dispatch(self, snap: RouteSnapshot) -> RouteSnapshot:
        """Until the dispatcher says to run this attempt; re-reading the route now and
        then in case it left the wait another way (e.g. an ambiguous dispatch)."""
        if self.task_id is not None and snap.state != "retrying" and self._cancels():
            cancelled = await self.route.cancel_transient_retry(self.task_id, "demo-user")
            self.control.counters[
                "retries_cancelled" if cancelled.active else "cancel_cleanups"
            ] += 1
            return cancelled.snapshot
        queue = self.inbox.queue(self.route_id)
        while True:
            raise_if_cancelled()  # 3.11's wait_for can return a result and drop a cancel
            try:
                record = await asyncio.wait_for(queue.get(), RECHECK_S)
            except TimeoutError:
                current = await self.route.snapshot()
                if current.state not in WAITING or current.generation != snap.generation:
                    return current
                continue
            if (record.generation, record.ordinal) == (snap.generation, snap.attempt_ordinal):
                return snap.model_copy(update={"state": "retrying"})
            self.control.counters["stale_dispatch_messages"] += 1

    def _cancels(self) -> bool:
        return self.script.choose(("cancel", "wait"), (1, 1)) == "cancel"

    async def _manual(self, snap: RouteSnapshot) -> RouteSnapshot:
        action = "close" if self.manual_used else self.script.choose(MANUAL, MANUAL_WEIGHTS)
        self.manual_used = True
        if action == "resume":
            return await self.route.resume(snap.generation)
        if action == "start_fresh":
            return await self.route.start_fresh(snap.generation)
        return await self.route.close(snap.generation)


def _now() -> datetime:
    return datetime.now(UTC)
