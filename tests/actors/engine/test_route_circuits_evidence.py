"""Circuits that follow the evidence (issue 15), through RouteService on real Redis with a
ManualClock, on the issue's profile: [primary model, fallback model on the same
provider], both with transient retry 2x from 1 s, reset waits up to 60 s, then skip; hard:
a reset wait, then skip. The evidence is OpenAI's own error shapes.

- a 429 with Retry-After: 2 opens the account circuit for 2 s (plus a jitter of at most
  0.2 s), not the 60 s first backoff; the attempt after it is the probe;
- a model's 503s open that model's circuit only: the fallback model of the same
  provider keeps serving;
- once open-until has passed, the next start takes the probe lease and runs on the
  primary; its success closes the circuit;
- a quota on one account parks only its routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import Final

import pytest

from actors.engine.circuit_effects import CircuitEffects
from actors.engine.service import RouteService
from actors.routes.circuit_board import REASON_PARKED, REASON_PROBE, CircuitBinding, covering
from actors.routes.circuit_board import profile_candidate_key as key_of
from actors.routes.commands import FireDue, ReportFailure, ReportSuccess, Start
from actors.routes.models import RouteSnapshot
from actors.store.circuit_store import CircuitStore
from catalogue import Evidence
from circuits import CircuitStatus, ResourceKey
from policy import Candidate, ClassPolicy, DynamicProfile, Outcome, RetryPolicy, WaitForResetPolicy
from tests.actors.conftest import Backend
from tests.actors.engine.test_route_circuits import run_async
from tests.actors.route_scenarios import safe_turn

pytestmark = pytest.mark.integration

BINDING: Final = CircuitBinding(installation_key=b"route-circuits-evidence-test")
RATE_BODY: Final = (
    '{"error":{"message":"Rate limit reached for requests","type":"requests",'
    '"param":null,"code":"rate_limit_exceeded"}}'
)
OVERLOADED_BODY: Final = (
    '{"error":{"message":"The server is overloaded or not ready yet.",'
    '"type":"server_error","param":null,"code":null}}'
)
QUOTA_BODY: Final = (
    '{"error":{"message":"You exceeded your current quota, please check your plan and '
    'billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}'
)


def openai(status: int, body: str, headers: dict[str, str] | None = None) -> Evidence:
    return Evidence(kind="http", http_status=status, provider="openai", body=body,
                    headers=headers or {})  # fmt: skip


def issue_profile(account: str | None = None) -> DynamicProfile:
    def one(candidate_id: str, model: str) -> Candidate:
        transient = ClassPolicy(
            retry=RetryPolicy(enabled=True, max_retries=2, initial_interval_seconds=1),
            wait_for_reset=WaitForResetPolicy(enabled=True, max_wait_seconds=60),
            on_exhausted=Outcome.SKIP,
        )
        hard = ClassPolicy(
            retry=RetryPolicy.disabled(),
            wait_for_reset=WaitForResetPolicy(enabled=True, max_wait_seconds=60),
            on_exhausted=Outcome.SKIP,
        )
        return Candidate(id=candidate_id, agent="api", provider="openai", model=model,
                         account=account, transient=transient, hard=hard)  # fmt: skip

    return DynamicProfile(candidates=(one("primary", "gpt-primary"), one("fallback", "gpt-mini")))


@asynccontextmanager
async def service(backend: Backend) -> AsyncIterator[tuple[RouteService, CircuitStore]]:
    assert backend.url is not None
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(backend.store(events_maxlen=100))
        circuits = CircuitStore.connect(backend.url, keys=backend.keys, settings=BINDING.settings)
        stack.push_async_callback(circuits.aclose)
        effects = CircuitEffects(circuits, BINDING)
        yield RouteService(store, backend.clock, circuits=effects), circuits


async def one(svc: RouteService, route_id: str, command: object) -> RouteSnapshot:
    (outcome,) = await svc.run_many([(route_id, command)])  # type: ignore[list-item]
    assert isinstance(outcome, RouteSnapshot), outcome
    return outcome


def failure(snapshot: RouteSnapshot, evidence: Evidence) -> ReportFailure:
    return ReportFailure(snapshot.generation, evidence, safe_turn(), "kanban", "inv")


def circuit(profile: DynamicProfile, candidate_id: str, depth: int) -> ResourceKey:
    """The covering circuit of a candidate: 0 provider-wide, 1 account, 2 model."""
    key = key_of(profile, candidate_id, BINDING)
    assert key is not None
    return covering(key)[depth][1]


@run_async
async def test_a_retry_after_of_two_seconds_waits_two_seconds_not_the_first_backoff(
    real_backend: Backend,
) -> None:
    clock, shape = real_backend.clock, issue_profile()
    async with service(real_backend) as (svc, circuits):
        route = await one(svc, "r-429", Start(shape, "kanban", "inv"))
        start = clock.now()
        limited = openai(429, RATE_BODY, {"Retry-After": "2"})
        parked = await one(svc, "r-429", failure(route, limited))
        account = await circuits.view(circuit(shape, "primary", 1))
        assert account.status is CircuitStatus.OPEN
        assert account.open_until is not None
        assert start + timedelta(seconds=2) <= account.open_until
        assert account.open_until <= start + timedelta(seconds=2.2)  # jitter <= 10 %
        assert parked.candidate_id == "primary"
        assert parked.reason == REASON_PARKED
        assert parked.deadline == account.open_until
        # the fallback shares the account: it is not used meanwhile, the primary is
        # tried once more at the reset, as the probe
        clock.set(account.open_until)
        fired = await one(svc, "r-429", FireDue(parked.generation, parked.attempt_ordinal))
        assert (fired.state, fired.candidate_id) == ("retrying", "primary")
        assert fired.reason is not None
        assert fired.reason.startswith(REASON_PROBE)
        served = await one(svc, "r-429", ReportSuccess(fired.generation))
        assert served.state == "active"
        assert (await circuits.view(circuit(shape, "primary", 1))).status is CircuitStatus.CLOSED


@run_async
async def test_a_model_answering_503_leaves_the_fallback_model_of_its_provider_serving(
    real_backend: Backend,
) -> None:
    clock, shape = real_backend.clock, issue_profile()
    down = openai(503, OVERLOADED_BODY)
    async with service(real_backend) as (svc, circuits):
        routes = [await one(svc, f"r-{n}", Start(shape, "kanban", "inv")) for n in range(3)]
        for route in routes:  # three 503s from three routes: the threshold
            await one(svc, route.route_id, failure(route, down))
        model = await circuits.view(circuit(shape, "primary", 2))
        assert model.status is CircuitStatus.OPEN
        for depth in (0, 1):
            assert (await circuits.view(circuit(shape, "primary", depth))).status is (
                CircuitStatus.CLOSED
            )
        assert (await circuits.view(circuit(shape, "fallback", 2))).status is CircuitStatus.CLOSED
        # a new request starts on the fallback (closed), never parked behind the primary
        fresh = await one(svc, "r-new", Start(shape, "kanban", "inv"))
        assert (fresh.state, fresh.candidate_id, fresh.circuit) == ("active", "fallback", None)
        clock.advance(timedelta(seconds=1))
        assert (await one(svc, "r-new", ReportSuccess(fresh.generation))).state == "active"


@run_async
async def test_an_expired_circuit_is_probed_by_the_next_start_and_closes_on_its_success(
    real_backend: Backend,
) -> None:
    clock, shape = real_backend.clock, issue_profile()
    down = openai(503, OVERLOADED_BODY)
    async with service(real_backend) as (svc, circuits):
        routes = [await one(svc, f"r-{n}", Start(shape, "kanban", "inv")) for n in range(3)]
        for route in routes:
            await one(svc, route.route_id, failure(route, down))
        model = circuit(shape, "primary", 2)
        opened = await circuits.view(model)
        assert opened.open_until is not None
        clock.set(opened.open_until - timedelta(seconds=1))
        early = await one(svc, "r-early", Start(shape, "kanban", "inv"))
        assert early.candidate_id == "fallback"  # still cooling down: avoided
        clock.set(opened.open_until)
        probe = await one(svc, "r-probe", Start(shape, "kanban", "inv"))
        assert (probe.candidate_id, probe.circuit) == ("primary", model.resource_id)
        assert probe.probe_token is not None
        assert (await circuits.view(model)).status is CircuitStatus.HALF_OPEN
        other = await one(svc, "r-other", Start(shape, "kanban", "inv"))
        assert other.candidate_id == "fallback"  # one probe at a time
        clock.advance(timedelta(seconds=3))
        served = await one(svc, "r-probe", ReportSuccess(probe.generation))
        assert (served.state, served.probe_token, served.circuit) == ("active", None, None)
        assert (await circuits.view(model)).status is CircuitStatus.CLOSED
        again = await one(svc, "r-after", Start(shape, "kanban", "inv"))
        assert again.candidate_id == "primary"


@run_async
async def test_a_quota_on_one_account_parks_only_the_routes_of_that_account(
    real_backend: Backend,
) -> None:
    team_a, team_b = issue_profile("team-a"), issue_profile("team-b")
    assert circuit(team_a, "primary", 1) != circuit(team_b, "primary", 1)
    assert circuit(issue_profile(), "primary", 1) not in {
        circuit(team_a, "primary", 1), circuit(team_b, "primary", 1),
    }  # fmt: skip
    quota = openai(429, QUOTA_BODY)
    async with service(real_backend) as (svc, circuits):
        a = await one(svc, "r-a", Start(team_a, "kanban", "inv"))
        after = await one(svc, "r-a", failure(a, quota))
        assert (await circuits.view(circuit(team_a, "primary", 1))).status is CircuitStatus.OPEN
        # no reset: a skip to the fallback, which shares the account, so it parks on it
        assert (after.candidate_id, after.reason) == ("fallback", REASON_PARKED)
        assert after.circuit == circuit(team_a, "primary", 1).resource_id
        a2 = await one(svc, "r-a2", Start(team_a, "kanban", "inv"))
        b = await one(svc, "r-b", Start(team_b, "kanban", "inv"))
        assert (await circuits.view(circuit(team_b, "primary", 1))).status is CircuitStatus.CLOSED
        assert (b.candidate_id, b.circuit) == ("primary", None)
        served = await one(svc, "r-b", ReportSuccess(b.generation))
        assert served.state == "active"
        # team a's next route is blocked on both of its candidates (one account)
        key = key_of(team_a, a2.candidate_id or "", BINDING)
        assert key is not None
        views = await circuits.views([k for _, k in covering(key)])
        assert any(v.status is not CircuitStatus.CLOSED for v in views)


@run_async
async def test_a_start_whose_probe_fails_reopens_the_circuit_for_the_next_backoff(
    real_backend: Backend,
) -> None:
    clock, shape = real_backend.clock, issue_profile()
    down = openai(503, OVERLOADED_BODY)
    async with service(real_backend) as (svc, circuits):
        routes = [await one(svc, f"r-{n}", Start(shape, "kanban", "inv")) for n in range(3)]
        for route in routes:
            await one(svc, route.route_id, failure(route, down))
        model = circuit(shape, "primary", 2)
        opened = await circuits.view(model)
        assert opened.open_until is not None
        clock.set(opened.open_until)
        probe = await one(svc, "r-probe", Start(shape, "kanban", "inv"))
        assert probe.probe_token is not None
        failed_at = clock.advance(timedelta(seconds=1))
        after = await one(svc, "r-probe", failure(probe, down))
        reopened = await circuits.view(model)
        assert reopened.status is CircuitStatus.OPEN
        assert reopened.open_until == failed_at + timedelta(seconds=120)  # doubled backoff
        # its retries (1 + 2 s) end long before that: it moves on to the fallback
        assert (after.candidate_id, after.probe_token) == ("fallback", None)
