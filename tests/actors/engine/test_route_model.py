"""A model-based test of routes: a Hypothesis state machine drives two routes through the
real engine (RouteService, its batch runner and the Lua transition) on Redis — reports,
manual actions, timers, replays of earlier calls, a crashed service replaced by a new one
that finds the schedules in Redis — and checks every answer, snapshot and attempt history
against the reference model of tests/actors/engine/route_model.py, which knows nothing of
the runtime. Runs on fakeredis (unit tier) and on the session's real Redis (integration),
with a fixed seed and a bounded number of examples."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fakeredis.aioredis import FakeRedis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from actors.clock import ManualClock
from actors.engine.service import RouteService
from actors.errors import InvalidStateError, StaleGenerationError, TransitionRejectedError
from actors.keys import KeySpace
from actors.routes.models import RouteSnapshot
from actors.store.route_store import RouteStore
from policy import Outcome
from tests.actors.conftest import Backend
from tests.actors.engine.route_model import CANDIDATES, RETRIES, ModelRoute, RefusedError
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

ROUTES = ("r-a", "r-b")
EXAMPLES = 60
STEPS = 30

Call = Callable[[RouteService, int, str], Awaitable[RouteSnapshot]]


def the_profile() -> Any:
    return profile(*(candidate(c, transient=retries(RETRIES, 1, Outcome.SKIP)) for c in CANDIDATES))


def report(route_id: str) -> Call:
    return lambda service, generation, request_id: service.report_failure(
        route_id, generation, overloaded(), safe_turn(), caller="kanban",
        invocation_id=f"inv-{route_id}", request_id=request_id,
    )  # fmt: skip


ACTIONS: dict[str, Callable[[str], Call]] = {
    "fail": report,
    "succeed": lambda r: lambda s, g, q: s.report_success(r, g, request_id=q),
    "retry_now": lambda r: lambda s, g, q: s.retry_now(r, g, request_id=q),
    "skip_now": lambda r: lambda s, g, q: s.skip_now(r, g, request_id=q),
    "cancel_wait": lambda r: lambda s, g, q: s.cancel_wait(r, g, request_id=q),
    "stop": lambda r: lambda s, g, q: s.stop(r, g, request_id=q),
    "resume": lambda r: lambda s, g, q: s.resume(r, g, request_id=q),
    "start_fresh": lambda r: lambda s, g, q: s.start_fresh(r, g, request_id=q),
    "close": lambda r: lambda s, g, q: s.close(r, g, request_id=q),
}


@dataclass(frozen=True)
class Sent:
    """A call made, as a client would send it again: its answer then."""

    route_id: str
    action: str
    generation: int
    request_id: str
    answer: RouteSnapshot | str  # the snapshot, or the refusal's kind


class RouteMachine(RuleBasedStateMachine):
    backend: Backend  # set by the test

    sent = Bundle("sent")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock(T0)
        self.keys = KeySpace(f"model-{uuid.uuid4().hex[:12]}")
        self.models = {route_id: ModelRoute() for route_id in ROUTES}
        self.store = self._open()
        self.service = RouteService(self.store, self.clock)

    def _open(self) -> RouteStore:
        backend = self.backend
        if backend.url is not None:
            return RouteStore.connect(backend.url, clock=self.clock, keys=self.keys)
        client = FakeRedis(server=backend.fake_server, decode_responses=True)
        return RouteStore(client, clock=self.clock, keys=self.keys, owns_client=True)

    def run(self, awaitable: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(awaitable)

    def teardown(self) -> None:
        self.run(self.store.aclose())
        self.loop.close()

    # -- calls -------------------------------------------------------------------------

    @initialize()
    def start_both(self) -> None:
        for route_id in ROUTES:
            started = self.run(self.service.start(
                route_id, the_profile(), caller="kanban", invocation_id=f"inv-{route_id}",
                request_id=f"start-{route_id}",
            ))  # fmt: skip
            self.models[route_id].start()
            self.check(route_id, started)

    @rule(
        target=sent,
        route_id=st.sampled_from(ROUTES),
        action=st.sampled_from(sorted(ACTIONS)),
        stale=st.booleans(),
    )
    def call(self, route_id: str, action: str, stale: bool) -> Sent:
        model = self.models[route_id]
        generation = model.generation - 1 if stale else model.generation
        request_id = uuid.uuid4().hex
        answer = self.send(route_id, action, generation, request_id)
        expected = self.expect(model, action, generation)
        if isinstance(answer, str):
            assert answer == expected, (route_id, action, answer, expected)
        else:
            assert expected is None, (route_id, action, expected, answer)
            self.check(route_id, answer)
        return Sent(route_id, action, generation, request_id, answer)

    @rule(earlier=sent)
    def replay(self, earlier: Sent) -> None:
        """The same call again (a client retrying, Ray re-sending a batch): the answer it
        got then, and no change."""
        if not isinstance(earlier.answer, RouteSnapshot):
            # A refused request changed nothing and is not recorded: sent again, it is
            # decided anew, as any call.
            self.call_again(earlier)
            return
        before = self.run(self.service.snapshot(earlier.route_id))
        again = self.send(earlier.route_id, earlier.action, earlier.generation, earlier.request_id)
        assert again == earlier.answer, (earlier, again)
        assert self.run(self.service.snapshot(earlier.route_id)) == before

    def call_again(self, earlier: Sent) -> None:
        model = self.models[earlier.route_id]
        answer = self.send(earlier.route_id, earlier.action, earlier.generation, earlier.request_id)
        expected = self.expect(model, earlier.action, earlier.generation)
        if isinstance(answer, str):
            assert answer == expected, (earlier, answer, expected)
        else:
            assert expected is None, (earlier, expected, answer)
            self.check(earlier.route_id, answer)

    @rule()
    def time_passes(self) -> None:
        """Every pending deadline comes (the longest retry interval is 2 s)."""
        self.clock.advance(timedelta(seconds=10))
        fired = self.run(self.service.fire_due_schedules())
        for snapshot in fired:
            self.models[snapshot.route_id].deadline_reached()
        for route_id, model in self.models.items():
            assert model.state not in {"retry_wait", "waiting_for_reset"}, (route_id, model)

    @rule()
    def crash(self) -> None:
        """The service's process dies; a new one starts from what Redis holds."""
        self.run(self.store.aclose())
        self.store = self._open()
        self.service = RouteService(self.store, self.clock)

    # -- checks ------------------------------------------------------------------------

    @invariant()
    def routes_match_the_model(self) -> None:
        for route_id in ROUTES:
            self.check(route_id, self.run(self.service.snapshot(route_id)))
            decided = [r.decision for r in self.run(self.service.history(route_id))]
            assert decided == self.models[route_id].decisions, (route_id, decided)

    def check(self, route_id: str, snapshot: RouteSnapshot) -> None:
        model = self.models[route_id]
        shown = (snapshot.state, snapshot.generation, snapshot.candidate_id,
                 snapshot.attempt_ordinal)  # fmt: skip
        assert shown == model.view(), (route_id, shown, model.view(), model.decisions)
        assert (snapshot.deadline is not None) == (snapshot.state in {"retry_wait"}), snapshot

    def send(self, route_id: str, action: str, generation: int, request_id: str) -> Any:
        call = ACTIONS[action](route_id)
        try:
            return self.run(call(self.service, generation, request_id))
        except StaleGenerationError:
            return "stale_generation"
        except InvalidStateError:
            return "invalid_state"
        except TransitionRejectedError as error:
            return type(error).__name__

    def expect(self, model: ModelRoute, action: str, generation: int) -> str | None:
        """Apply `action` to the model; the refusal's kind, or None when it is taken."""
        try:
            getattr(model, action)(generation)
        except RefusedError as refused:
            return refused.kind
        return None


def test_routes_follow_the_reference_model(backend: Backend) -> None:
    class Machine(RouteMachine):
        pass

    Machine.backend = backend
    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
            derandomize=True, database=None,
        ),
    )  # fmt: skip
